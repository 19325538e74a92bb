"""Per-episode metrics carry the episode id (and trace id) as OpenMetrics exemplars: served in
the OpenMetrics exposition only, within the 128-character label limit."""

from __future__ import annotations

import asyncio
import re

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import choose_encoder
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as text_families

from evalstream.assertions.suite_format.suites import Suite, parse_suite
from evalstream.assertions.suite_format.yaml_positions import load_yaml
from evalstream.assertions.wire.signals import Signal
from evalstream.stream.pipeline import MemorySink, Pipeline
from evalstream.stream.telemetry.exemplars import (
    MAX_LABEL_CHARS,
    episode_exemplar,
    episode_trace_id,
    exemplar_episode_id,
)
from evalstream.stream.telemetry.fast_metrics import LabelledCounter, LabelledHistogram
from evalstream.stream.telemetry.metrics import PipelineMetrics
from tests.pipeline.test_episode_errors import POISONS, mixed, run_pipeline

SUITE = """name: tiny
defaultAssertions:
  - type: tool.called
    name: Edit
"""
T0 = 1_767_225_600_000.0
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def suite() -> Suite:
    data, positions = load_yaml(SUITE, "tiny.yaml")
    return parse_suite(data, "tiny.yaml", positions)


def episode(eid: str, t0: float, tool: str, first_id: str | None = None) -> list[Signal]:
    return [
        Signal(first_id or f"{eid}-1", eid, "harness:start", t0),
        Signal(f"{eid}-2", eid, "tool:call", t0 + 100, payload={"name": tool}),
        Signal(f"{eid}-3", eid, "harness:end", t0 + 200),
    ]


def run(signals: list[Signal]) -> PipelineMetrics:
    metrics = PipelineMetrics(process=False)
    pipeline = Pipeline([suite()], MemorySink(), metrics=metrics, clock=lambda: T0)

    async def scenario() -> None:
        for sig in signals:
            await pipeline.handle_signal(sig)
        await pipeline.drain()

    asyncio.run(scenario())
    return metrics


def exemplars_of(text: str, sample_name: str) -> dict[tuple[tuple[str, str], ...], dict[str, str]]:
    """Sample labels -> exemplar labels, from an OpenMetrics exposition."""
    out = {}
    for family in text_string_to_metric_families(text):  # type: ignore[no-untyped-call]
        for s in family.samples:
            if s.name == sample_name and s.exemplar is not None:
                out[tuple(sorted(s.labels.items()))] = dict(s.exemplar.labels)
    return out


def test_openmetrics_names_the_episode_behind_each_verdict_series() -> None:
    metrics = run(
        episode("ep-pass", T0, "Edit")
        + episode("ep-fail", T0 + 1000, "Read", first_id=f"otel:{TRACE}:00f067aa0ba902b7:start")
    )
    text = openmetrics_latest(metrics.registry).decode()  # type: ignore[no-untyped-call]
    verdicts = exemplars_of(text, "evalstream_verdicts_total")
    by_verdict = {dict(k)["verdict"]: v for k, v in verdicts.items()}
    assert by_verdict == {
        "pass": {"episode_id": "ep-pass"},
        "fail": {"episode_id": "ep-fail", "trace_id": TRACE},
    }
    closed = exemplars_of(text, "evalstream_episodes_closed_total")
    assert {v["episode_id"] for v in closed.values()} == {"ep-pass", "ep-fail"}
    line = r'evalstream_verdicts_total\{.*verdict="pass".*\} 1\.0 # \{episode_id="ep-pass"\} 1\.0 '
    assert re.search(line, text)


def test_the_plain_text_format_has_no_exemplars_and_still_parses() -> None:
    metrics = run(episode("ep-pass", T0, "Edit"))
    text = generate_latest(metrics.registry).decode()
    assert "episode_id" not in text
    values = {
        (s.name, s.labels.get("verdict")): s.value
        for family in text_families(text)
        for s in family.samples
        if s.name == "evalstream_verdicts_total"
    }
    assert values == {("evalstream_verdicts_total", "pass"): 1.0}


def test_the_metrics_server_serves_openmetrics_only_when_asked() -> None:
    metrics = run(episode("ep-pass", T0, "Edit"))
    prometheus_accept = (
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
        "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    )
    encode, content_type = choose_encoder(prometheus_accept)
    assert content_type.startswith("application/openmetrics-text")
    assert '# {episode_id="ep-pass"}' in encode(metrics.registry).decode()
    encode, content_type = choose_encoder("text/plain")
    assert "episode_id" not in encode(metrics.registry).decode()


def test_histogram_buckets_keep_the_latest_exemplar_of_each_bucket() -> None:
    registry = CollectorRegistry()
    scores = LabelledHistogram("x_score", "Scores.", ["dimension"], (0.5, 1.0), registry)
    counter = LabelledCounter("x_alerts", "Alerts.", ["severity"], registry)
    first = episode_exemplar("a", {}, "", 1.0)
    second = episode_exemplar("b", {}, "", 2.0)
    scores.observe(("overall",), 0.2, first)
    scores.observe(("overall",), 0.9, first)
    scores.observe(("overall",), 0.8, second)
    scores.observe(("overall",), 0.7)  # no exemplar: the bucket keeps its last one
    counter.inc(("warning",), 1.0, first)
    counter.inc(("warning",), 1.0, second)
    text = openmetrics_latest(registry).decode()  # type: ignore[no-untyped-call]
    assert 'x_score_bucket{dimension="overall",le="0.5"} 1.0 # {episode_id="a"} 0.2 1.0' in text
    assert 'x_score_bucket{dimension="overall",le="1.0"} 4.0 # {episode_id="b"} 0.8 2.0' in text
    assert 'x_score_bucket{dimension="overall",le="+Inf"} 4.0\n' in text
    assert 'x_alerts_total{severity="warning"} 2.0 # {episode_id="b"} 1.0 2.0' in text


def test_long_episode_ids_are_shortened_deterministically_within_the_label_limit() -> None:
    for trace in ({}, {"trace_id": TRACE}):
        for length in (1, 77, 78, 79, 118, 119, 256):
            eid = "é" * (length // 2) + "x" * (length - length // 2)
            labels = episode_exemplar(eid, trace, "", 0.0).labels
            chars = sum(len(k) + len(v) for k, v in labels.items())
            assert chars <= MAX_LABEL_CHARS, (length, labels)
            again = episode_exemplar(eid, trace, "", 5.0).labels
            assert labels == again
            if chars < MAX_LABEL_CHARS:
                assert labels["episode_id"] == eid  # short enough: kept whole
    long_a, long_b = "a" * 200 + "1", "a" * 200 + "2"
    assert exemplar_episode_id(long_a, 118) != exemplar_episode_id(long_b, 118)
    assert exemplar_episode_id(long_a, 118).startswith("a" * 101 + "~")
    assert len(exemplar_episode_id(long_a, 118)) == 118


def test_trace_id_comes_from_the_attribute_or_an_otlp_signal_id() -> None:
    assert episode_trace_id({"trace_id": TRACE.upper()}, "sig-1") == TRACE
    assert episode_trace_id({}, f"otel:{TRACE}:00f067aa0ba902b7:start") == TRACE
    assert episode_trace_id({"trace_id": "not-a-trace"}, "sig-1") is None
    assert episode_trace_id({}, "otel:short:1:start") is None
    assert episode_trace_id({}, "sig-1") is None


def test_an_episode_reported_as_error_is_named_on_its_outcome() -> None:
    _, metrics = run_pipeline(mixed(POISONS["infinite tokens (evaluation fails)"]))
    text = openmetrics_latest(metrics.registry).decode()  # type: ignore[no-untyped-call]
    closed = exemplars_of(text, "evalstream_episodes_closed_total")
    by_outcome = {dict(k)["outcome"]: v["episode_id"] for k, v in closed.items()}
    assert by_outcome["error"] == "bad"
