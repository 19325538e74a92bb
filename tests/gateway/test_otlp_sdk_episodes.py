"""An instrumented service's traces, end to end: the OpenTelemetry SDK's OTLP/HTTP exporter
sends them to a live gateway, and its published signals run through the pipeline.

The trace is rooted in an HTTP server span with the agent span below it. Exported span by
span (the SDK's SimpleSpanProcessor), children arrive before their agent and the agent before
the root: suite selection waits for `agent_id`, and the root's end closes the episode after
the grace period (`ended`), not after the inactivity timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Tracer

from evalstream.assertions.evaluation.assembly import CloseRules
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.suite_format.suites import parse_suite
from evalstream.connectors.gateway.publisher import MemoryPublisher
from evalstream.stream.pipeline import Envelope, MemorySink, Pipeline
from tests.gateway.live import TOKENS, LiveServer

StartGateway = Callable[..., tuple[LiveServer, MemoryPublisher]]
Exporting = Callable[[bool], tuple[TracerProvider, MemoryPublisher]]
GRACE_MS = 2_000.0
SUITE = parse_suite(
    {
        "name": "support-agent",
        "match": {"agent_id": "support-*"},
        "defaultAssertions": [
            {"type": "agent.completed", "agentId": "support-bot"},
            {"type": "tool.called", "name": "search"},
            {"type": "signal.not", "pattern": "*:error"},
        ],
    },
    "inline",
)


@pytest.fixture
def exporting(live_gateway: StartGateway) -> Iterator[Exporting]:
    providers: list[TracerProvider] = []

    def make(batched: bool) -> tuple[TracerProvider, MemoryPublisher]:
        server, publisher = live_gateway()
        exporter = OTLPSpanExporter(
            endpoint=f"{server.url}/v1/traces",
            headers={"authorization": f"Bearer {TOKENS['acme']}"},
        )
        provider = TracerProvider(resource=Resource.create({"service.name": "support-api"}))
        processor = BatchSpanProcessor(exporter) if batched else SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
        providers.append(provider)
        return provider, publisher

    yield make
    for provider in providers:
        provider.shutdown()


def serve_request(provider: TracerProvider, *, with_agent: bool = True) -> str:
    """POST /chat handled by an HTTP server span; below it the agent, its LLM call and tool
    call (or, without the agent, a bare LLM call). Returns the trace id."""
    tracer = provider.get_tracer("support-api")
    with tracer.start_as_current_span(
        "POST /chat",
        kind=SpanKind.SERVER,
        attributes={"http.request.method": "POST", "http.route": "/chat"},
    ) as root:
        if with_agent:
            with tracer.start_as_current_span(
                "invoke_agent support-bot",
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": "support-bot",
                },
            ):
                chat(tracer)
                with tracer.start_as_current_span(
                    "execute_tool search",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "search",
                    },
                ):
                    pass
        else:
            chat(tracer)
        return format(root.get_span_context().trace_id, "032x")


def chat(tracer: Tracer) -> None:
    with tracer.start_as_current_span(
        "chat claude-haiku-4-5",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "claude-haiku-4-5",
            "gen_ai.usage.input_tokens": 10,
            "gen_ai.usage.output_tokens": 5,
        },
    ):
        pass


class Evaluated:
    """The pipeline on a hand-driven clock: records in arrival order at `now`, then time."""

    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.results: list[EpisodeResult] = []
        self.pipeline = Pipeline(
            [SUITE],
            MemorySink(),
            rules=CloseRules(grace_ms=GRACE_MS),
            clock=lambda: self.now,
            on_result=self.results.append,
        )

    def feed(self, publisher: MemoryPublisher) -> None:
        async def run() -> None:
            for record in publisher.records:
                env = Envelope("signals", record.value, record.key.encode())
                await self.pipeline.handle(env)

        asyncio.run(run())

    def advance(self, ms: float) -> list[EpisodeResult]:
        self.now += ms
        asyncio.run(self.pipeline.tick())
        return self.results


@pytest.mark.parametrize("batched", [False, True], ids=["children first", "one export"])
def test_an_http_rooted_trace_is_evaluated_by_the_agent_suite_and_ends_with_its_root(
    exporting: Exporting, batched: bool
) -> None:
    provider, publisher = exporting(batched)
    trace = serve_request(provider)
    assert provider.force_flush()
    first = publisher.records[0].value
    if not batched:  # span by span: the LLM call, without the agent that names the trace
        assert b'"provider:start"' in first
        assert b"agent_id" not in first
    run = Evaluated()
    run.feed(publisher)
    assert run.advance(GRACE_MS - 1) == []  # within grace of the root's end: still open
    [result] = run.advance(1)
    assert result.episode_id == f"acme/{trace}"
    assert (result.close_reason, result.status) == ("ended", "passed")
    assert result.suites == ["support-agent"]
    assert [a.verdict.value for a in result.assertions] == ["pass", "pass", "pass"]
    assert result.attrs["agent_id"] == "support-bot"
    assert result.signals == 9  # four spans, two signals each, and the root's end


def test_a_trace_no_suite_selects_is_reported_with_the_reason(
    exporting: Exporting,
) -> None:
    provider, publisher = exporting(False)
    serve_request(provider, with_agent=False)
    assert provider.force_flush()
    run = Evaluated()
    run.feed(publisher)
    [result] = run.advance(GRACE_MS)
    assert (result.close_reason, result.status) == ("ended", "unevaluated")
    assert result.notes == [
        "no suite matched: agent_id missing on every signal (suite 'support-agent' matches on it)"
    ]
    assert result.to_json()["notes"] == result.notes
