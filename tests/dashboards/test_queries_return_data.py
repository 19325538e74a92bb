"""Every panel's queries return data from a real Prometheus scraping a real worker that
evaluates a replay (`evalstream replay --into topic`, paced at the recorded timing)."""

from __future__ import annotations

import json
import math
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from connectors.recording import RecordedMessage, RecordingWriter
from stream.dashboards import generate
from stream.dev_kafka import KafkaBroker
from tests.kafka.helpers import Deployment
from tests.prometheus.conftest import PrometheusServer, free_port
from tests.replay.helpers import REPO, cli

pytestmark = [pytest.mark.kafka, pytest.mark.prometheus]
EXAMPLES = sorted(p.parent for p in (REPO / "examples").glob("*/suite.yaml"))
# Grafana's variables, as a dashboard with every value selected would send them.
VARIABLES = {
    "$__rate_interval": "1m",
    "$__range": "10m",
    "$agent": ".*",
    "$variant": ".*",
}
# Panels on metrics the worker does not emit in this branch yet (scoring, regression alerts,
# the judge and alert sinks are integrated into the worker separately).
AWAITING_SCORING = {
    "overview.json: Alerts firing [A]",
    "overview.json: Regression alerts firing [A]",
    "overview.json: Per-episode alerts [A]",
    "scores.json: Overall score [A]",
    "scores.json: Correctness [A]",
    "scores.json: Cost score [A]",
    "scores.json: Latency score [A]",
    "scores.json: Tool match [A]",
    "scores.json: Safety [A]",
    "scores.json: Cost Δ% vs baseline [A]",
    "scores.json: Cost Δ% vs baseline [B]",
    "scores.json: Latency Δ% vs baseline [A]",
    "scores.json: Latency Δ% vs baseline [B]",
    "scores.json: Episodes scored/s [A]",
    "scores.json: Per-episode alerts by dimension [A]",
    "operations.json: Judge calls by outcome [A]",
    "operations.json: Judge latency [A]",
    "operations.json: Judge latency [B]",
    "operations.json: Alert delivery failures [A]",
}
SPACING_MS = 5  # recorded time between messages: about 8 s of traffic at --speed 1


def substitute(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"an unknown dashboard variable in {expr}"
    return expr


def build_recording(path: Path) -> tuple[int, int]:
    """The examples' signals as keyed messages, plus input the worker dead-letters and
    duplicate deliveries; returns (messages, episodes)."""
    base = int(time.time() * 1000) - 3_600_000
    episodes: set[str] = set()
    messages: list[tuple[bytes | None, bytes]] = [(b"x", b"{broken json"), (None, b"{}")]
    for example in EXAMPLES:
        for line in (example / "episodes.jsonl").read_bytes().splitlines():
            if line.strip():
                episode = orjson.loads(line)["episode_id"]
                episodes.add(episode)
                messages.append((episode.encode(), line.strip()))
    messages[100:100] = messages[90:100]  # at-least-once: some deliveries twice
    with RecordingWriter(path, {"topic": "examples"}) as writer:
        for offset, (key, value) in enumerate(messages):
            writer.write(
                RecordedMessage("examples", 0, offset, base + offset * SPACING_MS, key, value)
            )
    return len(messages), len(episodes)


@pytest.fixture(scope="module")
def scraped(
    kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    workdir = tmp_path_factory.mktemp("dashboards")
    port = free_port()
    dep = Deployment(
        kafka_broker.bootstrap, workdir, [str(e / "suite.yaml") for e in EXAMPLES], partitions=4
    )
    dep.extra_env["EVALSTREAM_METRICS_PORT"] = str(port)
    dep.create_topics()
    server: PrometheusServer | None = None
    try:
        dep.start_worker("w1")
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, dep.logs()
                time.sleep(0.3)
        server = PrometheusServer(workdir, [f"127.0.0.1:{port}"])
        recording = workdir / "traffic.jsonl.zst"
        _, episodes = build_recording(recording)
        proc = cli(
            "replay",
            str(recording),
            "--into",
            "topic",
            "--topic",
            dep.topic("signals"),
            "--broker",
            dep.bootstrap,
            "--speed",
            "1",
            "--timestamps",
            "now",
        )
        assert proc.returncode == 0, proc.stderr
        closed = server.wait_for(
            "sum(evalstream_episodes_closed_total)", lambda v: v == episodes, timeout=90
        )
        assert closed == episodes, dep.logs()
        server.wait_for("count(evalstream_consumer_lag)", lambda v: (v or 0) > 0, timeout=20)
        yield server
    finally:
        if server is not None:
            server.stop()
        dep.stop_all()


@pytest.fixture(scope="module")
def empty_queries(scraped: PrometheusServer) -> set[str]:
    """ "dashboard: panel [refId]" of every query that returned no finite sample."""
    empty = set()
    for name, text in generate().items():
        for panel in json.loads(text)["panels"]:
            for target in panel.get("targets", []):
                result = scraped.query(substitute(target["expr"]))  # asserts status=success
                values = [float(r["value"][1]) for r in result]  # type: ignore[index]
                if not any(math.isfinite(v) for v in values):
                    empty.add(f"{name}: {panel['title']} [{target['refId']}]")
    return empty


def test_panels_on_emitted_metrics_return_data(empty_queries: set[str]) -> None:
    unexpected = sorted(empty_queries - AWAITING_SCORING)
    assert not unexpected, f"queries without data: {unexpected}"


@pytest.mark.xfail(
    strict=True,
    reason="the worker does not emit score, regression-alert, judge and alert-sink metrics "
    "in this branch yet; queries without data: " + "; ".join(sorted(AWAITING_SCORING)),
)
def test_every_panel_query_returns_data(empty_queries: set[str]) -> None:
    assert not sorted(empty_queries), f"queries without data: {sorted(empty_queries)}"


def test_variables_cover_every_query() -> None:
    found = {
        v
        for text in generate().values()
        for v in re.findall(r"\$[a-z_]+", text)
        if v not in {"$__range", "$__rate_interval"}
    }
    assert found <= set(VARIABLES)
