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

from evalstream.connectors.files.recording import RecordedMessage, RecordingWriter
from evalstream.stream.dashboards import generate
from evalstream.stream.dev_kafka import KafkaBroker
from tests.graders.judge_helpers import KEYWORDS, honest_judge
from tests.kafka.helpers import Deployment
from tests.otel_export.receiver import otlp_receiver
from tests.prometheus.conftest import PrometheusServer
from tests.replay.helpers import REPO, cli
from tests.scoring.http_peer import ScriptedServer
from tests.support.messages_api import MessagesAPIServer
from tests.support.ports import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.prometheus]
EXAMPLES = sorted(p.parent for p in (REPO / "examples").glob("*/suite.yaml"))
# Grafana's variables, as a dashboard with every value selected would send them.
VARIABLES = {
    "$__rate_interval": "1m",
    "$__range": "10m",
    "$agent": ".*",
    "$variant": ".*",
}
# The worker scores episodes (rolling baselines per agent), asks a judge (a local Messages
# API server) for one agent's episodes, and delivers alerts to a webhook that refuses them,
# so the scoring, judge and alert-delivery panels have data too. The examples share one model:
# keyed by it, the baseline exists after 5 episodes and most episodes get cost and latency
# scores, spread over the replay, so `rate()` sees them grow across scrapes (a series whose
# every increment falls between two scrapes would read 0/0).
SCORING_YAML = """\
baselines: {{mode: rolling, window: 5, key_attrs: [model]}}
sinks: [{{kind: webhook, name: refusing-hook, url: "{url}"}}]
"""
JUDGED_SUITE = """\
name: judged-reviews
match: {agent_id: code-review-agent}
defaultAssertions:
  - type: llm.judge
    criteria: ["identifies the SQL injection", "proposes a parameterized query"]
    minScore: 0.7
"""
SPACING_MS = 10  # recorded time between messages: about 16 s of traffic at --speed 1


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
    hook = ScriptedServer(default_status=400).__enter__()  # refuses: a counted failure
    judge = MessagesAPIServer(handler=honest_judge(KEYWORDS)).start()
    otlp = otlp_receiver()  # the worker exports its evaluations: the OTLP panel has data
    receiver = otlp.__enter__()
    scoring = workdir / "scoring.yaml"
    scoring.write_text(SCORING_YAML.format(url=hook.url("/alerts")))
    judged = workdir / "judged.yaml"
    judged.write_text(JUDGED_SUITE)
    suites = [str(e / "suite.yaml") for e in EXAMPLES] + [str(judged)]
    dep = Deployment(kafka_broker.bootstrap, workdir, suites, partitions=4)
    dep.extra_env["EVALSTREAM_METRICS_PORT"] = str(port)
    dep.extra_env["EVALSTREAM_SCORING"] = str(scoring)
    dep.extra_env["ANTHROPIC_API_KEY"] = "sk-ant-test-key"
    dep.extra_env["ANTHROPIC_BASE_URL"] = judge.base_url
    dep.extra_env["EVALSTREAM_OTLP_ENDPOINT"] = receiver.url
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
        server = PrometheusServer(
            workdir, [f"127.0.0.1:{port}"], ["--enable-feature=exemplar-storage"]
        )
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
        judge.stop()
        otlp.__exit__(None, None, None)
        hook.__exit__(None, None, None)


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


def test_every_panel_query_returns_data(empty_queries: set[str]) -> None:
    assert not sorted(empty_queries), f"queries without data: {sorted(empty_queries)}"


def test_every_exemplar_query_returns_exemplars_naming_replayed_episodes(
    scraped: PrometheusServer,
) -> None:
    """The worker's per-episode series carry exemplars; each panel query that asks for them
    gets some back, naming episodes of the replay."""
    episodes = {
        orjson.loads(line)["episode_id"]
        for example in EXAMPLES
        for line in (example / "episodes.jsonl").read_bytes().splitlines()
        if line.strip()
    }
    now = time.time()
    without: list[str] = []
    for name, text in generate().items():
        for panel in json.loads(text)["panels"]:
            for target in panel.get("targets", []):
                if not target.get("exemplar"):
                    continue
                series = scraped.exemplars(substitute(target["expr"]), now - 3600, now + 60)
                named = {
                    e["labels"]["episode_id"]
                    for s in series
                    for e in s["exemplars"]  # type: ignore[attr-defined]
                }
                assert named <= episodes, (panel["title"], named - episodes)
                if not named:
                    without.append(f"{name}: {panel['title']} [{target['refId']}]")
    assert without == [], without


def test_variables_cover_every_query() -> None:
    found = {
        v
        for text in generate().values()
        for v in re.findall(r"\$[a-z_]+", text)
        if v not in {"$__range", "$__rate_interval"}
    }
    assert found <= set(VARIABLES)
