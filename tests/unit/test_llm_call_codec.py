"""LLM-call records (native and episode-store AIR) become provider:start / provider:end signals."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from evalstream.assertions.errors import SignalDecodeError
from evalstream.assertions.suite_format.suites import parse_suite
from evalstream.connectors.codecs.llm_calls import llm_call_signals
from evalstream.stream.pipeline import EPISODES, Envelope, MemorySink, Pipeline

NATIVE = {
    "id": "call-1",
    "episode_id": "ep",
    "timestamp": "2026-01-01T00:00:00Z",
    "durationMs": 1500,
    "model": "claude-sonnet-4-5",
    "provider": "anthropic",
    "agent": "coder",
    "output": {"content": "hi", "usage": {"inputTokens": 1000, "outputTokens": 200}},
    "stopReason": "end_turn",
}


def test_native_record_becomes_start_and_end() -> None:
    start, end = llm_call_signals(NATIVE)
    assert (start.name, end.name) == ("provider:start", "provider:end")
    assert (start.id, end.id, end.parent) == ("call-1:start", "call-1:end", "call-1:start")
    assert end.ts - start.ts == 1500
    assert (start.agent, end.agent) == ("coder", "coder")
    assert start.payload["model"] == "claude-sonnet-4-5"
    assert end.payload["output"]["usage"]["inputTokens"] == 1000
    assert end.payload["stopReason"] == "end_turn"


def test_error_record_becomes_provider_error() -> None:
    _, end = llm_call_signals({**NATIVE, "status": "error", "error": "overloaded", "code": 529})
    assert end.name == "provider:error"
    assert end.payload == {"error": "overloaded", "code": 529}


def test_air_record_maps_tokens_and_takes_the_episode_from_the_key() -> None:
    air = {
        "version": "1.0",
        "run_id": "run-9",
        "trace_id": "t-1",
        "timestamp": "2026-01-01T00:00:00Z",
        "model": "gpt-4o",
        "provider": "openai",
        "endpoint": "/v1/chat/completions",
        "tokens": {"prompt": 300, "completion": 50, "total": 350},
        "duration_ms": 800,
        "status": "success",
    }
    start, end = llm_call_signals(air, episode_id="from-key")
    assert start.episode_id == end.episode_id == "from-key"
    assert end.payload["output"]["usage"] == {
        "inputTokens": 300,
        "outputTokens": 50,
        "totalTokens": 350,
    }
    assert start.payload["input"]["endpoint"] == "/v1/chat/completions"


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({k: v for k, v in NATIVE.items() if k != "episode_id"}, "missing_episode_id"),
        ({k: v for k, v in NATIVE.items() if k != "id"}, "bad_llm_call"),
        ({**NATIVE, "timestamp": "soon"}, "bad_timestamp"),
        ([1], "not_an_object"),
    ],
)
def test_bad_records_name_the_problem(record: object, reason: str) -> None:
    with pytest.raises(SignalDecodeError) as info:
        llm_call_signals(record)
    assert info.value.reason == reason


def test_llm_calls_join_their_episode_and_count_in_its_cost() -> None:
    suite = parse_suite(
        {"name": "s", "defaultAssertions": [{"type": "metric.cost.max", "value": 0.005}]}, "f"
    )
    sink = MemorySink()
    pipeline = Pipeline([suite], sink, clock=lambda: 0.0)
    start = {
        "id": "h",
        "episode_id": "ep",
        "name": "harness:start",
        "timestamp": "2026-01-01T00:00:00Z",
    }
    end = {
        "id": "z",
        "episode_id": "ep",
        "name": "harness:end",
        "timestamp": "2026-01-01T00:00:02Z",
    }

    async def scenario() -> None:
        await pipeline.handle(Envelope("signals", orjson.dumps(start), key=b"ep"))
        await pipeline.handle(Envelope("llm-calls", orjson.dumps(NATIVE), key=b"ep"))
        await pipeline.handle(Envelope("signals", orjson.dumps(end), key=b"ep"))
        await pipeline.drain()

    asyncio.run(scenario())
    [(_, episode)] = sink.records[EPISODES]
    assert episode["signals"] == 4
    # 1000 input tokens at $3/M + 200 output at $15/M = $0.006 > $0.005
    assert episode["metrics"]["cost_usd"] == pytest.approx(0.006)
    assert episode["assertions"][0]["verdict"] == "fail"
    assert episode["assertions"][0]["decided_at"] == "call-1:end"
