"""A real Prometheus scrapes `evalstream up`; the values match a known input."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.prometheus.conftest import PrometheusServer
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "code-review"

pytestmark = pytest.mark.prometheus


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def test_prometheus_scrapes_the_embedded_runtime(
    tmp_path: Path, prometheus: Callable[[list[str]], PrometheusServer]
) -> None:
    port = free_port()
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"")
    exe = Path(sys.executable).parent / "evalstream"
    up = subprocess.Popen(
        [
            str(exe),
            "up",
            "--suite",
            str(EXAMPLE / "suite.yaml"),
            str(live),
            "--follow",
            "--metrics-port",
            str(port),
            "--grace-ms",
            "200",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                scrape(port)
                break
            except OSError:
                assert up.poll() is None, up.stderr.read() if up.stderr else ""
                assert time.monotonic() < deadline, "evalstream up did not serve /metrics"
                time.sleep(0.2)
        server = prometheus([f"127.0.0.1:{port}"])
        with live.open("ab") as handle:
            handle.write((EXAMPLE / "episodes.jsonl").read_bytes())
        lines = sum(
            1 for line in (EXAMPLE / "episodes.jsonl").read_text().splitlines() if line.strip()
        )

        closed = server.wait_for("sum(evalstream_episodes_closed_total)", lambda v: v == 15)
        assert closed == 15
        assert (
            server.value('evalstream_episodes_closed_total{reason="ended",outcome="passed"}') == 11
        )
        assert (
            server.value('evalstream_episodes_closed_total{reason="ended",outcome="failed"}') == 4
        )
        assert server.value('evalstream_signals_consumed_total{source="signals"}') == lines
        assert server.wait_for("evalstream_open_episodes", lambda v: v == 0) == 0
        failed = server.value('sum(evalstream_verdicts_total{verdict="fail"})')
        assert failed == 5  # the four failing episodes fail five assertions in all
        assert (server.value("sum(evalstream_early_verdict_lead_seconds_count)") or 0) > 0
        assert (server.value('process_resident_memory_bytes{job="evalstream"}') or 0) > 10_000_000

        text = scrape(port)
        lint = subprocess.run(
            ["promtool", "check", "metrics"],
            input=text,
            capture_output=True,
            text=True,
            check=False,
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr
    finally:
        up.terminate()
        up.wait(timeout=20)
        if up.stderr is not None:
            up.stderr.close()
