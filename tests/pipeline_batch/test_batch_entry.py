"""The batch entry points of the pipeline give exactly what per-signal `handle` gives.

`Pipeline.handle_batch` (the embedded and benchmark callers) and `ingest` + `flush` (the Kafka
worker's loop) must publish the same records in the same order, and leave the same counters,
as `handle` called once per message: whatever the batch boundaries, on input with
duplicates, late and malformed messages, LLM-call messages, clock ticks and explicit closes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstream.assertions.evaluation.assembly import CloseReason, CloseRules
from evalstream.assertions.suite_format.suites import Suite, parse_suite
from evalstream.stream.pipeline import Envelope, MemorySink, Pipeline
from evalstream.stream.telemetry.metrics import PipelineMetrics

SUITE: Suite = parse_suite(
    {
        "name": "batch",
        "defaultAssertions": [
            {"type": "signal.contains", "pattern": "tool:call", "payload": {"name": "Edit"}},
            {"type": "signal.not", "pattern": "error:*"},
            {"type": "signal.count", "pattern": "text:delta", "min": 1, "max": 3},
            {
                "type": "signal.trajectory",
                "strict": True,
                "ignore": ["text:delta"],
                "patterns": ["agent:activated", "tool:call", "harness:end"],
            },
            {"type": "tool.called", "name": "Read", "max": 2},
            {"type": "metric.activations", "min": 1, "max": 2},
            {
                "type": "any",
                "assertions": [
                    {"type": "signal.contains", "pattern": "review:complete"},
                    {"type": "signal.not", "pattern": "policy:violation"},
                ],
            },
        ],
    },
    "batch.yaml",
)
NAMES = [
    "harness:start",
    "agent:activated",
    "tool:call",
    "text:delta",
    "review:complete",
    "policy:violation",
    "error:api",
    "harness:end",
]
EPISODES = ["a", "b", "c"]
LLM = "llm-calls"
MALFORMED = [b"{not json", b"\xff\xfe", b"[1]", b'{"name": "x", "timestamp": 1}']


@st.composite
def messages(draw: st.DrawFn) -> tuple[Envelope, float | None]:
    episode = draw(st.sampled_from(EPISODES))
    key = draw(st.sampled_from([episode.encode(), episode.encode(), None, b"other"]))
    ts = draw(st.integers(min_value=0, max_value=20_000))
    now = draw(st.one_of(st.none(), st.just(float(ts) + 1e6)))
    kind = draw(st.sampled_from(["signal"] * 8 + ["malformed", "llm"]))
    if kind == "malformed":
        return Envelope("signals", draw(st.sampled_from(MALFORMED)), key, 0, ts), now
    if kind == "llm":
        call = {
            "id": f"llm-{draw(st.integers(0, 3))}",
            "episode_id": episode,
            "timestamp": ts,
            "durationMs": 10,
            "model": "claude-haiku-4-5",
            "output": {"content": "ok", "usage": {"inputTokens": 5, "outputTokens": 2}},
        }
        return Envelope(LLM, orjson.dumps(call), key, 0, ts), now
    obj: dict[str, Any] = {
        "id": f"s{draw(st.integers(0, 12))}",  # small: duplicates are common
        "episode_id": episode,
        "name": draw(st.sampled_from(NAMES)),
        "timestamp": ts,
        "payload": {"name": draw(st.sampled_from(["Edit", "Read"]))},
    }
    if draw(st.booleans()):
        obj["timestamp"] = f"2026-01-01T00:00:{ts % 60:02d}.{ts % 1000:03d}Z"
    return Envelope("signals", orjson.dumps(obj), key, 0, ts), now


Step = tuple[str, Any]
steps = st.lists(
    st.one_of(
        messages().map(lambda m: ("msg", m)),
        st.sampled_from(EPISODES).map(lambda e: ("close", e)),
        st.integers(0, 40_000).map(lambda t: ("tick", float(t))),
    ),
    max_size=60,
)
rules = st.builds(
    CloseRules,
    grace_ms=st.sampled_from([0.0, 50.0]),
    inactivity_ms=st.sampled_from([500.0, 300_000.0]),
    max_signals=st.sampled_from([None, 4]),
    reorder_ms=st.sampled_from([0.0, 100.0]),
    dedupe_window=st.sampled_from([2, 65_536]),
)


def run(
    script: list[Step], close_rules: CloseRules, event_time: bool, mode: str, cuts: list[int]
) -> tuple[dict[str, Any], list[Any]]:
    """Plays a script through one entry point; returns the records and the counters."""
    clock = [0.0]
    sink = MemorySink()
    metrics = PipelineMetrics(process=False)
    pipeline = Pipeline(
        [SUITE],
        sink,
        rules=close_rules,
        metrics=metrics,
        clock=lambda: clock[0],
        require_key=True,
        event_time=event_time,
        time_each_message=False,
    )
    batch: list[tuple[Envelope, float | None]] = []

    async def flush_batch() -> None:
        if not batch:
            return
        envs = [env for env, _ in batch]
        nows = [now for _, now in batch]
        if mode == "batch":
            if all(now is not None for now in nows):
                await pipeline.handle_batch(envs, [n for n in nows if n is not None])
            elif all(now is None for now in nows):
                await pipeline.handle_batch(envs)
            else:  # mixed: one call per message, still through the batch entry point
                for env, now in batch:
                    await pipeline.handle_batch([env], None if now is None else [now])
        else:  # the worker's loop
            for env, now in batch:
                if pipeline.ingest(env, now):
                    await pipeline.flush()
            for topic in {env.topic for env in envs}:
                pipeline.count_consumed(topic, sum(1 for e in envs if e.topic == topic))
        batch.clear()

    async def play() -> None:
        for i, (kind, arg) in enumerate(script):
            if kind == "msg":
                env, now = arg
                clock[0] = max(clock[0], float(env.offset or 0))
                if mode == "handle":
                    await pipeline.handle(env, now=now)
                else:
                    batch.append((env, now))
                    if i in cuts:
                        await flush_batch()
                continue
            await flush_batch()
            if kind == "tick":
                clock[0] = arg
                await pipeline.tick()
            else:
                await pipeline.close(arg, CloseReason.TIMED_OUT)
        await flush_batch()
        await pipeline.drain()

    asyncio.run(play())
    samples = sorted(
        (s.name, sorted(s.labels.items()), s.value)
        for family in metrics.registry.collect()
        for s in family.samples
        if not s.name.endswith("_created") and "verdict_delay" not in s.name
    )
    return sink.records, samples


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    script=steps,
    close_rules=rules,
    event_time=st.booleans(),
    cuts=st.lists(st.integers(0, 60), max_size=8),
)
def test_batch_entry_points_equal_per_signal_handle(
    script: list[Step], close_rules: CloseRules, event_time: bool, cuts: list[int]
) -> None:
    expected = run(script, close_rules, event_time, "handle", cuts)
    assert run(script, close_rules, event_time, "batch", cuts) == expected
    assert run(script, close_rules, event_time, "ingest", cuts) == expected


def test_handle_batch_counts_consumed_signals_once_per_batch_per_topic() -> None:
    metrics = PipelineMetrics(process=False)
    sink = MemorySink()
    pipeline = Pipeline([SUITE], sink, metrics=metrics, require_key=True)
    good = {"id": "1", "episode_id": "a", "name": "tool:call", "timestamp": 1}
    envs = [
        Envelope("signals", orjson.dumps(good), b"a"),
        Envelope("signals", b"{bad", b"a"),
        Envelope(LLM, b"{bad", b"a"),
    ]
    asyncio.run(pipeline.handle_batch(envs, [1.0, 2.0, 3.0]))

    def consumed(topic: str) -> float | None:
        return metrics.registry.get_sample_value(
            "evalstream_signals_consumed_total", {"source": topic}
        )

    assert (consumed("signals"), consumed(LLM)) == (2.0, 1.0)
    assert [r["reason"] for _, r in sink.records["dlq"]] == ["invalid_json", "invalid_json"]
    assert "a" in pipeline.assembler.open
