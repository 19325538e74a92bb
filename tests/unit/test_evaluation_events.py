"""Verdict and score records -> `gen_ai.evaluation.result` events, and the export settings the
OpenTelemetry SDK's environment gives."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import orjson
import pytest

from evalstream.assertions.evaluation.assembly import CloseRules
from evalstream.assertions.suite_format.suites import parse_suite
from evalstream.connectors.codecs.otlp_genai import otlp_signals
from evalstream.connectors.otel_export.evaluation_events import (
    EVENT_NAME,
    derived_span,
    episode_events,
    error_type,
    score_events,
    verdict_event,
)
from evalstream.connectors.otel_export.otlp_export import (
    OtlpExportError,
    parse_pairs,
    resolve_settings,
    signal_url,
)
from evalstream.stream.pipeline import EPISODES, VERDICTS, Envelope, MemorySink, Pipeline

JSON = Any
TRACE = "5b8efff798038103d269b633813fc60c"
ROOT, TOOL, CHAT = "eee19b7ec3c1b174", "eee19b7ec3c1b175", "eee19b7ec3c1b176"
NOW_NS = 1_700_000_000_000_000_000
SUITE = parse_suite(
    {
        "name": "support",
        "match": {"agent_id": "support-*"},
        "defaultAssertions": [
            {"type": "tool.called", "name": "search"},
            {"type": "agent.completed", "agentId": "support-bot"},
            {"type": "signal.not", "pattern": "*:error"},
        ],
    },
    "inline",
)


def _span(span_id: str, parent: str | None, name: str, attrs: dict[str, str], start: int) -> JSON:
    span: dict[str, JSON] = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1_000_000),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }
    if parent is not None:
        span["parentSpanId"] = parent
    return span


def otlp_body() -> bytes:
    t0 = 1_700_000_000_000_000_000
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-bot"}
    spans = [
        _span(ROOT, None, "invoke_agent support-bot", agent, t0),
        _span(CHAT, ROOT, "chat", {"gen_ai.operation.name": "chat"}, t0 + 100),
        _span(
            TOOL,
            ROOT,
            "execute_tool search",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
            t0 + 200,
        ),
    ]
    spans[0]["endTimeUnixNano"] = str(t0 + 5_000_000)
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def pipeline_records() -> MemorySink:
    """The OTLP trace through the real pipeline: its verdict and episode records."""
    sink = MemorySink()
    now = [1_700_000_000_000.0]
    pipeline = Pipeline([SUITE], sink, rules=CloseRules(grace_ms=0), clock=lambda: now[0])

    async def run() -> None:
        for sig in otlp_signals(otlp_body(), json=True):
            value = orjson.dumps(sig.to_wire())
            await pipeline.handle(Envelope("signals", value, sig.episode_id.encode()))
        await pipeline.drain()

    asyncio.run(run())
    return sink


def test_a_verdict_hangs_under_the_span_that_decided_it() -> None:
    sink = pipeline_records()
    verdicts = [record for _, record in sink.records[VERDICTS]]
    events = {
        e.attributes["evalstream.assertion.type"]: e
        for v in verdicts
        if (e := verdict_event(v, NOW_NS))
    }
    assert set(events) == {"tool.called", "agent.completed", "signal.not"}
    tool = events["tool.called"]
    assert (tool.trace_id, tool.parent_span_id) == (TRACE, TOOL)
    assert tool.attributes["gen_ai.evaluation.name"] == "support/0/tool.called"
    assert tool.attributes["gen_ai.evaluation.score.label"] == "pass"
    assert tool.attributes["gen_ai.evaluation.score.value"] == 1.0
    assert tool.attributes["evalstream.early"] is True
    assert tool.attributes["evalstream.episode_id"] == TRACE
    assert tool.attributes["evalstream.agent_id"] == "support-bot"
    assert tool.attributes["evalstream.suite"] == "support"
    assert isinstance(tool.attributes["gen_ai.evaluation.explanation"], str)
    # decided at close: under the trace's first span, its root
    for closing in (events["signal.not"], events["agent.completed"]):
        assert (closing.trace_id, closing.parent_span_id) == (TRACE, ROOT)
        assert closing.attributes["evalstream.early"] is False
    # the event time is the deciding signal's time
    assert tool.time_ns == 1_700_000_000_000_000_000 + 200 // 1_000_000 * 1_000_000


def test_the_episode_record_gives_the_same_events_as_the_verdict_records() -> None:
    sink = pipeline_records()
    [(_, episode)] = sink.records[EPISODES]
    from_episode = {e.key: e.parent_span_id for e in episode_events(episode, NOW_NS)}
    from_verdicts = {
        e.key: e.parent_span_id
        for _, v in sink.records[VERDICTS]
        if (e := verdict_event(v, NOW_NS)) is not None
    }
    assert from_episode == from_verdicts
    late_only = episode_events(episode, NOW_NS, with_early=False)
    late_types = [e.attributes["evalstream.assertion.type"] for e in late_only]
    assert late_types == ["agent.completed", "signal.not"]


def verdict(**fields: JSON) -> dict[str, JSON]:
    record: dict[str, JSON] = {
        "dedupe_key": "ep-1@sig_1/s/0/abc",
        "episode_id": "ep-1",
        "case_id": None,
        "agent_id": "a",
        "variant": None,
        "early": False,
        "decided_at_time": None,
        "index": 0,
        "type": "llm.judge",
        "suite": "s",
        "rule": "abc",
        "verdict": "pass",
        "message": "ok",
        "decided_at": None,
    }
    record.update(fields)
    return record


def test_an_episode_without_otlp_ids_gets_derived_ids_stable_across_runs() -> None:
    first = verdict_event(verdict(), NOW_NS)
    again = verdict_event(verdict(), NOW_NS + 5)
    assert first is not None
    assert again is not None
    assert (first.trace_id, first.parent_span_id) == (again.trace_id, again.parent_span_id)
    ref = derived_span("ep-1", "sig_1")
    assert (first.trace_id, first.parent_span_id) == (ref.trace_id, ref.span_id)
    other = verdict_event(verdict(dedupe_key="ep-2@sig_1/s/0/abc", episode_id="ep-2"), NOW_NS)
    assert other is not None
    assert other.trace_id != first.trace_id
    assert first.span_id != first.parent_span_id  # the event's own span id
    assert first.time_ns == NOW_NS  # no decision time: when it is exported


def test_episode_trace_attributes_name_the_parent() -> None:
    trace, span = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    event = verdict_event(verdict(attrs={"trace_id": trace.upper(), "span_id": span}), NOW_NS)
    assert event is not None
    assert (event.trace_id, event.parent_span_id) == (trace, span)
    only_trace = verdict_event(verdict(attrs={"trace_id": trace}), NOW_NS)
    assert only_trace is not None
    assert only_trace.trace_id == trace
    assert only_trace.parent_span_id == derived_span("ep-1", "sig_1").span_id
    bogus = verdict_event(verdict(attrs={"trace_id": "not-a-trace"}), NOW_NS)
    assert bogus is not None
    assert bogus.trace_id == derived_span("ep-1", "sig_1").trace_id


def test_an_errored_assertion_carries_error_type_and_no_score_value() -> None:
    event = verdict_event(verdict(verdict="error", message="TimeoutError: judge slow"), NOW_NS)
    assert event is not None
    assert event.error
    assert event.attributes["error.type"] == "TimeoutError"
    assert event.attributes["gen_ai.evaluation.score.label"] == "error"
    assert "gen_ai.evaluation.score.value" not in event.attributes
    failed = verdict_event(verdict(verdict="fail", message="tool never called"), NOW_NS)
    assert failed is not None
    assert not failed.error
    assert "error.type" not in failed.attributes
    assert failed.attributes["gen_ai.evaluation.score.value"] == 0.0
    assert error_type("no judge configured: set ANTHROPIC_API_KEY") == "_OTHER"


def test_scores_become_one_event_per_dimension_under_the_first_span() -> None:
    record = {
        "dedupe_key": f"ep-9@otel:{TRACE}:{ROOT}:start",
        "episode_id": "ep-9",
        "case_id": "c1",
        "attrs": {"agent_id": "support-bot", "variant": "v2"},
        "suites": ["support"],
        "ended_at": "2023-11-14T22:13:20.500Z",
        "assertions": [],
        "scores": {
            "baseline": "support-bot/v1",
            "overall": 0.8,
            "correctness": 1.0,
            "cost": 0.5,
            "tool_match": None,
            "latency": 0.75,
            "safety": 1.0,
            "notes": ["no tool expectation"],
        },
    }
    events = score_events(record, NOW_NS)
    names = [e.attributes["gen_ai.evaluation.name"] for e in events]
    assert names == [
        "score.correctness",
        "score.cost",
        "score.latency",
        "score.safety",
        "score.overall",
    ]
    assert all((e.trace_id, e.parent_span_id) == (TRACE, ROOT) for e in events)
    cost = events[1]
    assert cost.attributes["gen_ai.evaluation.score.value"] == 0.5
    assert cost.attributes["evalstream.variant"] == "v2"
    assert cost.attributes["evalstream.baseline"] == "support-bot/v1"
    assert cost.attributes["gen_ai.evaluation.explanation"] == "no tool expectation"
    assert cost.time_ns == 1_700_000_000_500_000_000
    assert len({e.span_id for e in events}) == len(events)
    assert score_events({**record, "scores": None}, NOW_NS) == []


def test_a_record_missing_its_verdict_yields_no_event() -> None:
    assert verdict_event({"episode_id": "x"}, NOW_NS) is None
    assert episode_events({"episode_id": "x", "assertions": "nope"}, NOW_NS) == []
    assert EVENT_NAME == "gen_ai.evaluation.result"


# --- settings from the environment -----------------------------------------------------------


def test_the_flag_wins_over_the_environment_and_is_a_base_url() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://logs:9999/custom",
    }
    assert resolve_settings("http://flag:4318/", "logs", env).endpoint == "http://flag:4318/v1/logs"
    assert resolve_settings(None, "logs", env).endpoint == "http://logs:9999/custom"
    assert resolve_settings(None, "spans", env).endpoint == "http://collector:4318/v1/traces"
    assert resolve_settings(None, "spans", {}).endpoint == "http://localhost:4318/v1/traces"
    assert signal_url("http://phoenix:6006/v1/traces", "traces") == "http://phoenix:6006/v1/traces"
    langfuse = signal_url("https://cloud.langfuse.com/api/public/otel", "traces")
    assert langfuse == "https://cloud.langfuse.com/api/public/otel/v1/traces"


def test_headers_timeout_and_resource_are_read_as_the_sdk_reads_them() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20cGs6c2s=, x-tenant = acme",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-only=traces",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2.5",
        "OTEL_SERVICE_NAME": "evals",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod",
    }
    logs = resolve_settings("http://c:4318", "logs", env)
    assert logs.headers == {"authorization": "Basic cGs6c2s=", "x-tenant": "acme"}
    assert logs.timeout_s == 2.5
    assert logs.resource == {"deployment.environment": "prod", "service.name": "evals"}
    assert resolve_settings("http://c:4318", "spans", env).headers == {"x-only": "traces"}


@pytest.mark.parametrize(
    ("endpoint", "mode", "env", "fragment"),
    [
        ("localhost:4318", "logs", {}, "'localhost:4318' is not an http"),
        ("http://c:4318/v1/logs", "spans", {}, "the logs path"),
        ("http://c:4318", "logs", {"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, "positive number"),
        ("http://c:4318", "logs", {"OTEL_EXPORTER_OTLP_HEADERS": "justakey"}, "key=value"),
        ("http://c:4318", "metrics", {}, "not one of"),
    ],
)
def test_settings_that_cannot_work_are_refused_with_the_fix(
    endpoint: str, mode: str, env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(OtlpExportError, match=fragment):
        resolve_settings(endpoint, mode, env)
    assert parse_pairs("", "header") == {}


def test_the_wire_encoding_decodes_with_opentelemetry_proto() -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: PLC0415
        ExportLogsServiceRequest,
    )
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: PLC0415
        ExportTraceServiceRequest,
    )

    from evalstream.connectors.otel_export.otlp_encode import encode_logs, encode_spans  # noqa: PLC0415

    long_message = "é" * 300 + "\udc80"  # over 127 bytes, non-ASCII, a lone surrogate
    event = verdict_event(verdict(verdict="error", message=f"KeyError: {long_message}"), NOW_NS)
    assert event is not None
    attrs = {**event.attributes, "big": 2**40, "negative": -5, "ratio": 0.25, "flag": False}
    event = dataclasses.replace(event, attributes=attrs)
    resource = {"service.name": "evalstream", "deployment.environment": "prod"}
    logs = ExportLogsServiceRequest.FromString(encode_logs([event, event], resource))
    [resource_logs] = logs.resource_logs
    assert {kv.key: kv.value.string_value for kv in resource_logs.resource.attributes} == resource
    [scope] = resource_logs.scope_logs
    assert scope.scope.name == "evalstream"
    first, _ = scope.log_records
    assert first.event_name == "gen_ai.evaluation.result"
    assert (first.trace_id.hex(), first.span_id.hex()) == (event.trace_id, event.parent_span_id)
    assert first.time_unix_nano == first.observed_time_unix_nano == NOW_NS
    assert first.severity_number == 13
    decoded = {kv.key: kv.value for kv in first.attributes}
    assert decoded["big"].int_value == 2**40
    assert decoded["negative"].int_value == -5
    assert decoded["ratio"].double_value == 0.25
    assert decoded["flag"].HasField("bool_value")
    assert decoded["error.type"].string_value == "KeyError"
    assert decoded["gen_ai.evaluation.explanation"].string_value.startswith("KeyError: éé")
    spans = ExportTraceServiceRequest.FromString(encode_spans([event], resource))
    [span] = spans.resource_spans[0].scope_spans[0].spans
    assert span.parent_span_id.hex() == event.parent_span_id
    assert span.span_id.hex() == event.span_id
    assert span.start_time_unix_nano == span.end_time_unix_nano == NOW_NS
    assert (span.status.code, span.status.message) == (2, "KeyError")
    assert span.kind == 1
