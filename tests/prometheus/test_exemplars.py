"""A real Prometheus with exemplar storage scrapes `evalstream up --scoring`: the exemplars it
returns name the episodes that were evaluated, and the trace of an episode that came in over
OTLP (through the embedded gateway) or named one in its `trace_id` attribute."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import httpx
import orjson
import pytest

from tests.gateway.test_otlp import otlp_json, span
from tests.prometheus.conftest import PrometheusServer
from tests.scoring_flow.traffic import SCORING_YAML, SUITE_YAML, episodes
from tests.support.ports import free_port

pytestmark = pytest.mark.prometheus
EXE = Path(sys.executable).parent / "evalstream"
ATTR_TRACE = "0af7651916cd43dd8448eb211c80319c"  # named by an episode's `trace_id` attribute
OTLP_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"  # of the episode posted as OTLP spans
OTLP_EPISODE = OTLP_TRACE  # a trace-scoped episode: its root span ends it
WINDOW_S = 600


def jsonl_episodes() -> list[tuple[str, bytes, str | None]]:
    """Three scored episodes of agent `support` (id, JSONL, trace id); the second names a
    trace in its attrs."""
    out: list[tuple[str, bytes, str | None]] = []
    for n, (episode_id, signals) in enumerate(episodes()):
        if n == 3:
            break
        trace = ATTR_TRACE if n == 1 else None
        if trace is not None:
            signals[0]["attrs"] = {**signals[0]["attrs"], "trace_id": trace}
        out.append((episode_id, b"".join(orjson.dumps(s) + b"\n" for s in signals), trace))
    return out


def otlp_episode() -> bytes:
    """An HTTP root span with an agent (named `support`) and a chat under it: one episode,
    ended by the root span."""
    now_ns = time.time_ns()

    def times(start_ms: int, end_ms: int) -> dict[str, str]:
        return {
            "startTimeUnixNano": str(now_ns + start_ms * 1_000_000),
            "endTimeUnixNano": str(now_ns + end_ms * 1_000_000),
        }

    spans = [
        span(
            "aaaaaaaaaaaaaaa1",
            {"http.request.method": "POST", "http.route": "/chat"},
            name="POST /chat",
            kind=2,
            **times(0, 900),
        ),
        span(
            "aaaaaaaaaaaaaaa2",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support",
            },
            "aaaaaaaaaaaaaaa1",
            **times(10, 800),
        ),
        span(
            "aaaaaaaaaaaaaaa3",
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-haiku-4-5"},
            "aaaaaaaaaaaaaaa2",
            **times(20, 500),
        ),
    ]
    for s in spans:
        s["traceId"] = OTLP_TRACE
    return otlp_json(*spans)


def exemplar_labels(server: PrometheusServer, expr: str) -> list[dict[str, str]]:
    now = time.time()
    return [
        dict(e["labels"])
        for series in server.exemplars(expr, now - WINDOW_S, now + 60)
        for e in series["exemplars"]  # type: ignore[attr-defined]
    ]


def wait_for_exemplar(server: PrometheusServer, expr: str, episode_id: str) -> dict[str, str]:
    deadline = time.monotonic() + 60
    while True:
        for labels in exemplar_labels(server, expr):
            if labels.get("episode_id") == episode_id:
                return labels
        assert time.monotonic() < deadline, f"no exemplar of {episode_id} on {expr}"
        time.sleep(0.5)


def wait_until_served(port: int, up: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).close()
            return
        except OSError:
            assert up.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "evalstream up did not serve /metrics"
            time.sleep(0.2)


def test_prometheus_stores_exemplars_naming_the_evaluated_episodes(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE_YAML)
    (tmp_path / "scoring.yaml").write_text(SCORING_YAML)
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"")
    log = tmp_path / "up.log"
    metrics_port, gateway_port = free_port(), free_port()
    with log.open("wb") as out:
        up = subprocess.Popen(
            [
                str(EXE),
                "up",
                "--suite",
                str(tmp_path / "suite.yaml"),
                "--scoring",
                str(tmp_path / "scoring.yaml"),
                str(live),
                "--follow",
                "--metrics-port",
                str(metrics_port),
                "--gateway-port",
                str(gateway_port),
                "--grace-ms",
                "200",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server: PrometheusServer | None = None
    try:
        wait_until_served(metrics_port, up, log)
        server = PrometheusServer(
            tmp_path, [f"127.0.0.1:{metrics_port}"], ["--enable-feature=exemplar-storage"]
        )
        evaluated: list[str] = []
        closed = "evalstream_episodes_closed_total"
        # One episode at a time, each seen by a scrape before the next: every one must show.
        for episode_id, lines, trace in jsonl_episodes():
            with live.open("ab") as handle:
                handle.write(lines)
            evaluated.append(episode_id)
            labels = wait_for_exemplar(server, closed, episode_id)
            expected = {"episode_id": episode_id}
            if trace is not None:
                expected["trace_id"] = trace
            assert labels == expected
        response = httpx.post(
            f"http://127.0.0.1:{gateway_port}/v1/traces",
            content=otlp_episode(),
            headers={"content-type": "application/json"},
        )
        assert response.status_code in (200, 202), response.text
        evaluated.append(OTLP_EPISODE)
        labels = wait_for_exemplar(server, closed, OTLP_EPISODE)
        assert labels == {"episode_id": OTLP_EPISODE, "trace_id": OTLP_TRACE}

        # Verdicts and scores carry them too; nothing names an episode that was not evaluated.
        wait_for_exemplar(server, "evalstream_verdicts_total", OTLP_EPISODE)
        overall = 'evalstream_episode_score_bucket{dimension="overall"}'
        wait_for_exemplar(server, overall, OTLP_EPISODE)
        for expr in (closed, "evalstream_verdicts_total", "evalstream_episode_score_bucket"):
            named = {labels["episode_id"] for labels in exemplar_labels(server, expr)}
            assert named, expr
            assert named <= set(evaluated), (expr, named)
        all_closed = {labels["episode_id"] for labels in exemplar_labels(server, closed)}
        assert all_closed == set(evaluated)
    finally:
        if server is not None:
            server.stop()
        up.terminate()
        up.wait(timeout=30)
