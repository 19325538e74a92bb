"""OTLP traces: the OpenTelemetry SDK's own OTLP/HTTP exporters (protobuf and JSON, gzip)
send GenAI spans to /v1/traces; the mapping follows the GenAI conventions and OpenInference."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from opentelemetry.exporter.otlp.common.http import Compression as JsonCompression
from opentelemetry.exporter.otlp.json.http.trace_exporter import (
    OTLPSpanExporter as JsonSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Status, StatusCode
from starlette.testclient import TestClient

from evalstream.connectors.codecs.otlp_genai import otlp_signals
from evalstream.connectors.gateway.publisher import MemoryPublisher
from tests.gateway.conftest import AppFactory
from tests.gateway.live import TOKENS, LiveServer, bearer

JSON = Any
StartGateway = Callable[..., tuple[LiveServer, MemoryPublisher]]


def emit_agent_run(provider: TracerProvider, conversation: str) -> dict[str, str]:
    """An agent run with GenAI spans: agent -> chat (tool call requested) -> tool -> a
    second chat in OpenInference/deprecated spelling that fails. Returns span ids by role."""
    tracer = provider.get_tracer("test-agent")
    ids: dict[str, str] = {}
    common = {"gen_ai.conversation.id": conversation}
    with tracer.start_as_current_span(
        "invoke_agent planner",
        attributes={
            **common,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "planner",
        },
    ) as agent:
        ids["agent"] = format(agent.get_span_context().span_id, "016x")
        ids["trace"] = format(agent.get_span_context().trace_id, "032x")
        with tracer.start_as_current_span(
            "chat claude-sonnet-4-5",
            attributes={
                **common,
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.response.model": "claude-sonnet-4-5-20250929",
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 30,
                "gen_ai.usage.cache_read.input_tokens": 50,
                "gen_ai.response.finish_reasons": ["tool_use"],
                "gen_ai.output.messages": orjson.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [
                                {"type": "text", "content": "Let me look."},
                                {
                                    "type": "tool_call",
                                    "id": "toolu_1",
                                    "name": "search",
                                    "arguments": {"q": "otel"},
                                },
                            ],
                        }
                    ]
                ).decode(),
            },
        ) as chat:
            ids["chat"] = format(chat.get_span_context().span_id, "016x")
        with tracer.start_as_current_span(
            "execute_tool search",
            attributes={
                **common,
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.id": "toolu_1",
                "gen_ai.tool.call.arguments": '{"q": "otel"}',
                "gen_ai.tool.call.result": '{"hits": 3}',
            },
        ) as tool:
            ids["tool"] = format(tool.get_span_context().span_id, "016x")
        with tracer.start_as_current_span(
            "llm",
            attributes={
                "session.id": conversation,
                "openinference.span.kind": "LLM",
                "gen_ai.system": "openai",
                "llm.model_name": "gpt-4o-mini",
                "gen_ai.usage.prompt_tokens": 11,
                "gen_ai.usage.completion_tokens": 0,
            },
        ) as failing:
            ids["failing"] = format(failing.get_span_context().span_id, "016x")
            failing.set_status(Status(StatusCode.ERROR, "rate limited"))
    return ids


def check_agent_run(
    records: list[JSON], ids: dict[str, str], episode: str, *, batched: bool
) -> None:
    """`batched`: all spans came in one export, so children inherit the agent's name (spans
    exported one by one arrive child first, before the agent span that names the agent)."""
    agent = {"agent": "planner"} if batched else {}
    by_name = {r["name"]: r for r in records}
    assert [r["name"] for r in records] == [
        "agent:activated",
        "provider:start",
        "provider:end",
        "tool:call",
        "tool:result",
        "provider:start",
        "provider:error",
        "agent:completed",
    ]
    assert {r["episode_id"] for r in records} == {episode}
    trace = ids["trace"]

    def sid(role: str, end: str) -> str:
        return f"otel:{trace}:{ids[role]}:{end}"

    activated = by_name["agent:activated"]
    assert activated["id"] == sid("agent", "start")
    assert "parent" not in activated.get("source", {})
    assert activated["payload"] == {"agent": "planner", "operation": "invoke_agent"}
    assert activated["attrs"]["agent_id"] == "planner"
    start = records[1]
    assert start["id"] == sid("chat", "start")
    assert start["source"] == {**agent, "provider": "anthropic", "parent": sid("agent", "start")}
    assert start["payload"]["model"] == "claude-sonnet-4-5"
    assert start["payload"]["provider"] == "anthropic"
    end = records[2]
    assert end["source"]["parent"] == sid("chat", "start")
    assert end["payload"]["model"] == "claude-sonnet-4-5-20250929"
    assert end["payload"]["stopReason"] == "tool_use"
    assert end["payload"]["output"] == {
        "content": "Let me look.",
        "toolCalls": [{"id": "toolu_1", "name": "search", "input": {"q": "otel"}}],
        "usage": {
            "inputTokens": 120,
            "outputTokens": 30,
            "totalTokens": 150,
            "cacheReadInputTokens": 50,
        },
    }
    assert end["payload"]["durationMs"] == pytest.approx(end["timestamp"] - start["timestamp"])
    call, result = records[3], records[4]
    assert call["payload"] == {"id": "toolu_1", "name": "search", "input": {"q": "otel"}}
    assert call["source"] == {**agent, "parent": sid("agent", "start")}
    assert result["payload"]["result"] == {"hits": 3}
    failed_start, failed = records[5], records[6]
    assert failed_start["payload"]["model"] == "gpt-4o-mini"
    assert failed_start["source"]["provider"] == "openai"  # deprecated gen_ai.system
    assert failed["payload"]["error"] == "rate limited"
    assert by_name["agent:completed"]["payload"]["agent"] == "planner"
    times = [r["timestamp"] for r in records]
    assert times == sorted(times)


@pytest.fixture
def tracing(
    live_gateway: StartGateway,
) -> Iterator[Callable[..., TracerProvider]]:
    providers: list[TracerProvider] = []

    def make(exporter: SpanExporter, *, batched: bool = False) -> TracerProvider:
        provider = TracerProvider(resource=Resource.create({"service.name": "test-agent"}))
        processor = BatchSpanProcessor(exporter) if batched else SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
        providers.append(provider)
        return provider

    yield make
    for provider in providers:
        provider.shutdown()


def ordered(publisher: MemoryPublisher) -> list[JSON]:
    records = [orjson.loads(r.value) for r in publisher.records]
    return sorted(records, key=lambda r: r["timestamp"])


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.NoCompression])
def test_the_sdk_protobuf_exporter_feeds_genai_spans(
    live_gateway: StartGateway,
    tracing: Callable[..., TracerProvider],
    compression: Compression,
) -> None:
    server, publisher = live_gateway()
    exporter = OTLPSpanExporter(
        endpoint=f"{server.url}/v1/traces",
        headers={"authorization": f"Bearer {TOKENS['acme']}"},
        compression=compression,
    )
    provider = tracing(exporter, batched=True)
    ids = emit_agent_run(provider, "conv-42")
    assert provider.force_flush()
    records = ordered(publisher)
    check_agent_run(records, ids, "acme/conv-42", batched=True)
    assert {r["attrs"]["tenant"] for r in records if "attrs" in r} == {"acme"}
    assert all(r.stream == "signals" and r.key == "acme/conv-42" for r in publisher.records)


@pytest.mark.parametrize("compression", [JsonCompression.GZIP, JsonCompression.DEFLATE])
def test_the_sdk_json_exporter_feeds_genai_spans(
    live_gateway: StartGateway,
    tracing: Callable[..., TracerProvider],
    compression: JsonCompression,
) -> None:
    server, publisher = live_gateway()
    exporter = JsonSpanExporter(
        endpoint=f"{server.url}/v1/traces",
        headers={"x-evalstream-token": TOKENS["globex"]},
        compression=compression,
    )
    ids = emit_agent_run(tracing(exporter), "conv-json")
    check_agent_run(ordered(publisher), ids, "globex/conv-json", batched=False)


def test_an_unauthenticated_exporter_is_refused_and_nothing_is_published(
    live_gateway: StartGateway, tracing: Callable[..., TracerProvider]
) -> None:
    server, publisher = live_gateway()
    exporter = OTLPSpanExporter(endpoint=f"{server.url}/v1/traces", timeout=2)
    tracer = tracing(exporter).get_tracer("t")
    with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
        pass
    assert publisher.records == []


# --- mapping details on hand-written OTLP JSON ----------------------------------------------


def otlp_json(*spans: dict[str, JSON], resource: dict[str, JSON] | None = None) -> bytes:
    attrs = [{"key": k, "value": {"stringValue": v}} for k, v in (resource or {}).items()]
    doc = {
        "resourceSpans": [
            {"resource": {"attributes": attrs}, "scopeSpans": [{"scope": {}, "spans": list(spans)}]}
        ]
    }
    return orjson.dumps(doc)


def span(span_id: str, attrs: dict[str, JSON], parent: str = "", **extra: JSON) -> dict[str, JSON]:
    def value(v: JSON) -> dict[str, JSON]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, list):
            return {"arrayValue": {"values": [value(x) for x in v]}}
        return {"stringValue": v}

    out = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": span_id,
        "parentSpanId": parent,
        "name": extra.pop("name", "span"),
        "kind": 3,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000500000000",
        "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()],
        "status": {},
    }
    out.update(extra)
    return out


def test_openinference_spans_map_like_genai_ones() -> None:
    body = otlp_json(
        span(
            "eee19b7ec3c1b174",
            {
                "openinference.span.kind": "AGENT",
                "agent.name": "router",
                "session.id": "sess-9",
            },
        ),
        span(
            "eee19b7ec3c1b175",
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "claude-haiku-4-5",
                "llm.provider": "anthropic",
                "llm.token_count.prompt": 40,
                "llm.token_count.completion": 8,
                "llm.token_count.total": 48,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "Sure.",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
                    '{"id": 7}'
                ),
            },
            parent="eee19b7ec3c1b174",
        ),
        span(
            "eee19b7ec3c1b176",
            {"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"id": 7}'},
            parent="eee19b7ec3c1b174",
            status={"code": "STATUS_CODE_ERROR", "message": "not found"},
        ),
        span("eee19b7ec3c1b177", {"http.method": "GET"}, parent="eee19b7ec3c1b176", name="GET /x"),
    )
    signals = otlp_signals(body, json=True)
    assert {s.episode_id for s in signals} == {"sess-9"}
    names = {s.name: s for s in signals}
    assert names["agent:activated"].payload["agent"] == "router"
    end = names["provider:end"]
    assert end.agent == "router"  # inherited from the agent span
    assert end.payload["output"] == {
        "content": "Sure.",
        "toolCalls": [{"id": None, "name": "lookup", "input": {"id": 7}}],
        "usage": {"inputTokens": 40, "outputTokens": 8, "totalTokens": 48},
    }
    assert names["tool:call"].payload == {
        "id": "eee19b7ec3c1b176",
        "name": "lookup",
        "input": {"id": 7},
    }
    assert names["tool:error"].payload["error"] == "not found"
    generic = names["span:start"]
    assert generic.payload == {"name": "GET /x", "kind": "client"}
    assert generic.parent == "otel:5b8efff798038103d269b633813fc60c:eee19b7ec3c1b176:start"


def test_without_a_conversation_id_the_trace_is_the_episode() -> None:
    body = otlp_json(span("eee19b7ec3c1b174", {"gen_ai.operation.name": "chat"}))
    signals = otlp_signals(body, json=True)
    assert {s.episode_id for s in signals} == {"5b8efff798038103d269b633813fc60c"}
    explicit = otlp_signals(body, json=True, episode_id="given")
    assert {s.episode_id for s in explicit} == {"given"}


def test_evalstream_resource_attributes_become_episode_attrs() -> None:
    body = otlp_json(
        span("eee19b7ec3c1b174", {"gen_ai.operation.name": "chat", "evalstream.variant": "b"}),
        resource={"evalstream.case_id": "case-3", "service.name": "svc"},
    )
    start = otlp_signals(body, json=True)[0]
    assert start.attrs == {"case_id": "case-3", "variant": "b"}


@pytest.fixture
def traces_client(make_app: AppFactory) -> Iterator[tuple[TestClient, MemoryPublisher]]:
    app, publisher = make_app(max_depth=6, max_string_length=100, max_signals=2)
    with TestClient(app) as http:
        yield http, publisher


def nested_value(levels: int) -> dict[str, JSON]:
    value: dict[str, JSON] = {"stringValue": "x"}
    for _ in range(levels):
        value = {"arrayValue": {"values": [value]}}
    return value


@pytest.mark.parametrize(
    ("body", "ctype", "status", "code"),
    [
        (b"\x0a\xff\xff", "application/x-protobuf", 400, "invalid_otlp"),
        (b"{not json", "application/json", 400, "invalid_otlp"),
        (b'{"resourceSpans": 5}', "application/json", 400, "invalid_otlp"),
        (otlp_json(span("zz", {})), "application/json", 400, "invalid_otlp"),
        (b"<xml/>", "text/xml", 415, "unsupported_media_type"),
        (
            otlp_json(
                span("eee19b7ec3c1b174", {}, attributes=[{"key": "k", "value": nested_value(8)}])
            ),
            "application/json",
            422,
            "too_deep",
        ),
        (
            otlp_json(span("eee19b7ec3c1b174", {"k": "x" * 101})),
            "application/json",
            422,
            "string_too_long",
        ),
        (
            otlp_json(*(span(f"eee19b7ec3c1b17{i}", {}) for i in range(3))),
            "application/json",
            413,
            "too_many_signals",
        ),
    ],
    ids=[
        "corrupt protobuf",
        "invalid json",
        "wrong json shape",
        "bad span id",
        "unsupported type",
        "attribute too deep",
        "attribute too long",
        "too many spans",
    ],
)
def test_bad_traces_get_their_status_and_publish_nothing(
    traces_client: tuple[TestClient, MemoryPublisher],
    body: bytes,
    ctype: str,
    status: int,
    code: str,
) -> None:
    http, publisher = traces_client
    response = http.post(
        "/v1/traces", content=body, headers={**bearer("acme"), "content-type": ctype}
    )
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert publisher.records == []


def test_gzip_json_traces_answer_an_empty_export_response(
    traces_client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = traces_client
    body = gzip.compress(otlp_json(span("eee19b7ec3c1b174", {"gen_ai.operation.name": "chat"})))
    response = http.post(
        "/v1/traces",
        content=body,
        headers={**bearer("acme"), "content-type": "application/json", "content-encoding": "gzip"},
    )
    assert response.status_code == 200
    assert response.json() == {}
    assert [orjson.loads(r.value)["name"] for r in publisher.records] == [
        "provider:start",
        "provider:end",
        "harness:end",  # the span is the trace's root, and the trace the episode
    ]
