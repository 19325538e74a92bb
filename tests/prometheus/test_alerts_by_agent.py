"""A real Prometheus scrapes `evalstream up --scoring` while two agents regress: the alert
metrics name each agent and variant, and the rules' grouping keeps them apart."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.prometheus.conftest import PrometheusServer
from tests.scoring_flow.traffic import SCORING_YAML, episodes
from tests.support.ports import free_port

pytestmark = pytest.mark.prometheus
AGENTS = (("support", "v1"), ("billing", "v7"))
SUITE_YAML = """\
name: two-agents
match: {agent_id: [support, billing]}
defaultAssertions:
  - type: tool.called
    name: lookup
"""


def traffic() -> bytes:
    """Each agent's episodes, normal then with doubled latency (the regression, never
    recovered while the test looks)."""
    lines: list[bytes] = []
    for episode_id, signals in episodes():
        if "recovered" in episode_id:
            continue
        for agent, variant in AGENTS:
            for sig in signals:
                copy = {**sig, "episode_id": f"{agent}-{episode_id}", "id": f"{agent}-{sig['id']}"}
                if "attrs" in sig:
                    copy["attrs"] = {"agent_id": agent, "variant": variant}
                lines.append(orjson.dumps(copy))
    return b"\n".join(lines) + b"\n"


def test_regression_alerts_are_returned_by_agent(
    tmp_path: Path, prometheus: Callable[[list[str]], PrometheusServer]
) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE_YAML)
    (tmp_path / "scoring.yaml").write_text(SCORING_YAML)
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"")
    port = free_port()
    exe = Path(sys.executable).parent / "evalstream"
    up = subprocess.Popen(
        [
            str(exe),
            "up",
            "--suite",
            str(tmp_path / "suite.yaml"),
            "--scoring",
            str(tmp_path / "scoring.yaml"),
            str(live),
            "--follow",
            "--metrics-port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).close()
                break
            except OSError:
                assert up.poll() is None, up.stderr.read() if up.stderr else ""
                assert time.monotonic() < deadline, "evalstream up did not serve /metrics"
                time.sleep(0.2)
        server = prometheus([f"127.0.0.1:{port}"])
        live.write_bytes(traffic())

        query = (
            "sum by (agent, variant, dimension) "
            '(evalstream_regression_alerts_firing{dimension="latency_p95_ms"}) > 0'
        )
        deadline = time.monotonic() + 60
        firing = server.query(query)
        while len(firing) < len(AGENTS) and time.monotonic() < deadline:
            time.sleep(0.5)
            firing = server.query(query)
        got = sorted((str(r["metric"]["agent"]), str(r["metric"]["variant"])) for r in firing)  # type: ignore[index]
        assert got == sorted(AGENTS), firing
        # Nothing else regressed: no other dimension fires for either agent.
        others = server.query(
            "sum by (agent, dimension) "
            '(evalstream_regression_alerts_firing{dimension!="latency_p95_ms"}) > 0'
        )
        assert others == []
        # Every agent's series exist at 0 for what did not fire, so a rate reads 0, not nothing.
        quiet = server.query(
            'count by (agent) (evalstream_regression_alerts_firing{severity="critical"} == 0)'
        )
        assert sorted(str(r["metric"]["agent"]) for r in quiet) == ["billing", "support"]  # type: ignore[index]
    finally:
        up.terminate()
        up.wait(timeout=30)
        if up.stderr is not None:
            up.stderr.close()
