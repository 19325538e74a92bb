"""Against a backend users run: Arize Phoenix (from PyPI, in a venv cached under
~/.cache/evalstream), receiving the agent's own trace and evalstream's evaluation spans
(`--otlp-mode spans`); Phoenix's REST API then shows the evaluations under the spans they
evaluate.

The first run installs `arize-phoenix` (about a minute on a warm network, ~850 MB); a failed
install skips the test with pip's own words. Phoenix runs on 127.0.0.1 with a temporary
working directory (SQLite) and its telemetry off.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.otel_export.agent_trace import serve_request, wait_ready, write_suite
from tests.support.ports import free_port

pytestmark = pytest.mark.slow
JSON = Any
PHOENIX_VERSION = "20.26.1"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evalstream"
EXE = Path(sys.executable).parent / "evalstream"
INSTALL_TIMEOUT_S = 1_200


def phoenix_executable() -> Path:
    """`phoenix` of the cached venv, installed there the first time (a venv without the
    marker of a finished install is made again)."""
    venv = CACHE / f"phoenix-{PHOENIX_VERSION}"
    exe, done = venv / "bin" / "phoenix", venv / ".installed"
    if exe.exists() and done.exists():
        return exe
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", f"arize-phoenix=={PHOENIX_VERSION}"],
            check=True,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"arize-phoenix=={PHOENIX_VERSION} did not install: {exc.stderr[-2000:]}")
    except subprocess.TimeoutExpired:
        pytest.skip(f"arize-phoenix=={PHOENIX_VERSION} did not install in {INSTALL_TIMEOUT_S}s")
    done.write_text(PHOENIX_VERSION, encoding="utf-8")
    return exe


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    exe = phoenix_executable()
    workdir = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = workdir / "phoenix.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(exe), "serve"], env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/healthz", lambda: proc.poll() is None, log, timeout=180)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def trace_spans(phoenix: str, trace_id: str) -> list[dict[str, JSON]]:
    response = httpx.get(
        f"{phoenix}/v1/projects/default/spans", params={"trace_id": trace_id, "limit": 100}
    )
    if response.status_code == 404:  # the project appears with its first span
        return []
    response.raise_for_status()
    spans: list[dict[str, JSON]] = response.json()["data"]
    return spans


def test_evaluation_spans_appear_in_phoenix_under_the_evaluated_spans(
    phoenix: str, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(EXE),
                "up",
                "--suite",
                str(write_suite(tmp_path)),
                "--metrics-port",
                "0",
                "--gateway-port",
                str(port),
                "--grace-ms",
                "100",
                "--otlp-endpoint",
                f"{phoenix}/v1/traces",
                "--otlp-mode",
                "spans",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        gateway = f"http://127.0.0.1:{port}"
        wait_ready(f"{gateway}/readyz", lambda: proc.poll() is None, log)
        # The agent's trace goes to Phoenix and to evalstream, as an instrumented app does.
        provider = TracerProvider(resource=Resource.create({"service.name": "support-api"}))
        for endpoint in (f"{phoenix}/v1/traces", f"{gateway}/v1/traces"):
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        trace = serve_request(provider)
        assert provider.force_flush()
        provider.shutdown()
        deadline = time.monotonic() + 60
        while True:
            spans = trace_spans(phoenix, trace.trace_id)
            evaluations = [s for s in spans if s["span_kind"] == "EVALUATOR"]
            if len(evaluations) >= 2:
                break
            assert time.monotonic() < deadline, (spans, log.read_text())
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    by_id = {s["context"]["span_id"]: s for s in spans}
    assert {trace.root, trace.agent, trace.chat, trace.tool} <= set(by_id)  # the agent's own
    by_type = {s["attributes"]["evalstream.assertion.type"]: s for s in evaluations}
    assert set(by_type) == {"tool.called", "tool.notCalled"}
    called = by_type["tool.called"]
    assert called["parent_id"] == trace.tool
    assert by_id[called["parent_id"]]["name"] == "execute_tool search"
    assert called["name"] == "evaluation support-agent/0/tool.called"
    assert called["attributes"]["gen_ai.evaluation.score.label"] == "pass"
    assert called["attributes"]["gen_ai.evaluation.score.value"] == 1.0
    assert called["start_time"] == called["end_time"]
    not_called = by_type["tool.notCalled"]
    assert not_called["parent_id"] == trace.root
    assert by_id[not_called["parent_id"]]["name"] == "POST /chat"
