"""The OTLP/HTTP exporter against a local receiver that decodes what it gets: log records and
child spans, retries after 503, drops when the queue is full, failures counted."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator

import pytest

from evalstream.connectors.otel_export.evaluation_events import verdict_event
from evalstream.connectors.otel_export.otlp_export import (
    OtlpExporter,
    OtlpExportSettings,
    resolve_settings,
)
from evalstream.stream.evaluation_export import EvaluationExport
from evalstream.stream.pipeline import EPISODES, VERDICTS, MemorySink
from evalstream.stream.telemetry.metrics import PipelineMetrics
from tests.otel_export.receiver import Receiver, otlp_receiver
from tests.support.ports import free_port

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"
NOW_NS = 1_700_000_000_000_000_000


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with otlp_receiver() as r:
        yield r


def settings(receiver_url: str, mode: str = "logs", **changes: float) -> OtlpExportSettings:
    base = resolve_settings(receiver_url, mode, {"OTEL_EXPORTER_OTLP_HEADERS": "x-key=secret"})
    quick = {"flush_interval_s": 0.05, "backoff_base_s": 0.01, "backoff_max_s": 0.05}
    return dataclasses.replace(base, **{**quick, **changes})  # type: ignore[arg-type]


def verdict(index: int, outcome: str = "pass", message: str = "ok") -> dict[str, object]:
    return {
        "dedupe_key": f"ep@otel:{TRACE}:{SPAN}:start/suite/{index}/r{index}",
        "episode_id": "ep",
        "agent_id": "bot",
        "early": True,
        "decided_at_time": "2023-11-14T22:13:20.000Z",
        "index": index,
        "type": "tool.called",
        "suite": "suite",
        "rule": f"r{index}",
        "verdict": outcome,
        "message": message,
        "decided_at": f"otel:{TRACE}:{SPAN}:end",
    }


def event(index: int, outcome: str = "pass", message: str = "ok"):  # type: ignore[no-untyped-def]
    made = verdict_event(verdict(index, outcome, message), NOW_NS)
    assert made is not None
    return made


def test_log_records_carry_the_event_name_the_span_and_the_attributes(receiver: Receiver) -> None:
    exporter = OtlpExporter(settings(receiver.url))
    for i in range(3):
        assert exporter.offer(event(i))
    stats = exporter.close()
    assert (stats.sent, stats.dropped, stats.failed) == (3, 0, 0)
    items = receiver.items
    assert [i.attributes["gen_ai.evaluation.name"] for i in items] == [
        "suite/0/tool.called",
        "suite/1/tool.called",
        "suite/2/tool.called",
    ]
    first = items[0]
    assert first.path == "/v1/logs"
    assert first.name == "gen_ai.evaluation.result"
    assert (first.trace_id, first.span_id) == (TRACE, SPAN)
    assert first.time_ns == NOW_NS
    assert first.attributes["gen_ai.evaluation.score.value"] == 1.0
    assert first.attributes["gen_ai.evaluation.score.label"] == "pass"
    assert first.attributes["evalstream.episode_id"] == "ep"
    assert first.resource["service.name"] == "evalstream"
    assert all(headers["x-key"] == "secret" for _, headers in receiver.requests)
    assert all(h["content-type"] == "application/x-protobuf" for _, h in receiver.requests)


def test_spans_are_zero_duration_children_of_the_evaluated_span(receiver: Receiver) -> None:
    exporter = OtlpExporter(settings(receiver.url, "spans"))
    exporter.offer(event(0))
    exporter.offer(event(1, "error", "TimeoutError: judge too slow"))
    exporter.close()
    ok, errored = receiver.items
    assert ok.path == "/v1/traces"
    assert ok.name == "evaluation suite/0/tool.called"
    assert (ok.trace_id, ok.parent_span_id) == (TRACE, SPAN)
    assert ok.span_id not in (SPAN, errored.span_id)
    assert ok.time_ns == ok.end_ns == NOW_NS
    assert ok.attributes["openinference.span.kind"] == "EVALUATOR"
    assert ok.status_code == 0
    assert errored.status_code == 2  # STATUS_CODE_ERROR
    assert errored.attributes["error.type"] == "TimeoutError"


def test_503s_are_retried_and_every_event_arrives_once(receiver: Receiver) -> None:
    metrics = PipelineMetrics(process=False)
    receiver.fail_next(503, 503, 429)
    export = EvaluationExport(settings(receiver.url), metrics)
    for i in range(5):
        export.exporter.offer(event(i))
    stats = export.close()
    assert (stats.sent, stats.failed, stats.retries) == (5, 0, 3)
    names = sorted(str(i.attributes["gen_ai.evaluation.name"]) for i in receiver.items)
    assert names == [f"suite/{i}/tool.called" for i in range(5)]
    assert len(receiver.requests) >= 4
    sample = metrics.registry.get_sample_value
    assert sample("evalstream_otlp_export_events_total", {"signal": "logs", "outcome": "sent"}) == 5
    assert (
        sample("evalstream_otlp_export_events_total", {"signal": "logs", "outcome": "failed"}) == 0
    )
    assert sample("evalstream_otlp_export_retries_total") == 3


def test_a_full_queue_drops_and_counts_without_blocking(receiver: Receiver) -> None:
    metrics = PipelineMetrics(process=False)
    export = EvaluationExport(settings(receiver.url, queue_size=2, batch_size=1), metrics)
    receiver.hold()
    assert export.exporter.offer(event(0))
    assert receiver.arrived.wait(10)  # the thread is sending event 0, held by the receiver
    offered = [export.exporter.offer(event(i)) for i in range(1, 7)]
    assert offered == [True, True, False, False, False, False]
    receiver.release()
    stats = export.close()
    assert (stats.sent, stats.dropped) == (3, 4)
    assert sorted(i.attributes["evalstream.assertion.index"] for i in receiver.items) == [0, 1, 2]
    dropped = {"signal": "logs", "outcome": "dropped"}
    assert metrics.registry.get_sample_value("evalstream_otlp_export_events_total", dropped) == 4


def test_a_refusal_is_not_retried_and_counts_as_failed(receiver: Receiver) -> None:
    receiver.fail_next(400)
    exporter = OtlpExporter(settings(receiver.url))
    exporter.offer(event(0))
    stats = exporter.close()
    assert (stats.sent, stats.failed, stats.retries) == (0, 1, 0)
    assert len(receiver.requests) == 1


def test_an_unreachable_endpoint_is_retried_then_failed() -> None:
    exporter = OtlpExporter(settings(f"http://127.0.0.1:{free_port()}", max_attempts=3))
    exporter.offer(event(0))
    exporter.offer(event(1))
    stats = exporter.close()
    assert (stats.sent, stats.failed, stats.retries) == (0, 2, 2)
    assert not exporter.offer(event(2))  # closed: dropped
    assert exporter.stats.dropped == 1


def test_an_event_that_cannot_be_made_costs_the_event_not_the_evaluation(
    receiver: Receiver,
) -> None:
    def broken_clock() -> int:
        raise RuntimeError("clock gone")

    metrics = PipelineMetrics(process=False)
    export = EvaluationExport(settings(receiver.url), metrics, clock_ns=broken_clock)
    inner = MemorySink()
    sink = export.sink(inner)
    record = verdict(0)
    asyncio.run(sink.publish(VERDICTS, "ep", record))
    asyncio.run(sink.publish(EPISODES, "ep", {"episode_id": "ep", "assertions": []}))
    stats = export.close()
    assert inner.records[VERDICTS] == [("ep", record)]  # published all the same
    assert len(inner.records[EPISODES]) == 1
    assert (stats.sent, stats.failed) == (0, 2)
    failed = {"signal": "logs", "outcome": "failed"}
    assert metrics.registry.get_sample_value("evalstream_otlp_export_events_total", failed) == 2
