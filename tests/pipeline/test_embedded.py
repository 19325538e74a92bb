"""The embedded runtime and the pipeline: same results as `check`, dead letters, metrics."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
from pathlib import Path

import orjson
import pytest

from evalstream.assertions.suite_format.suites import load_suite
from evalstream.stream.embedded import EmbeddedRun, run_embedded
from evalstream.stream.offline import check_files
from evalstream.stream.pipeline import DLQ, EPISODES, Envelope, MemorySink, Pipeline
from evalstream.stream.telemetry.metrics import PipelineMetrics

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.parent for p in (REPO / "examples").glob("*/suite.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_embedded_runtime_equals_check(example: Path) -> None:
    suites = [load_suite(example / "suite.yaml")]
    recording = str(example / "episodes.jsonl")
    offline = check_files([recording], suites)
    embedded = asyncio.run(run_embedded([recording], suites))
    by_id = {r.episode_id: r.to_json() for r in embedded.results}
    assert len(by_id) == len(offline.results) > 0
    for result in offline.results:
        assert by_id[result.episode_id] == result.to_json()
    assert embedded.exit_code() == offline.exit_code()


SIGNAL = {"id": "s1", "episode_id": "e1", "name": "harness:start", "timestamp": 1000}


@pytest.mark.parametrize(
    ("value", "key", "reason"),
    [
        (b"\xff\xfe not utf-8", b"e1", "undecodable"),
        (b"{broken", b"e1", "invalid_json"),
        (b"[1, 2]", b"e1", "not_an_object"),
        (orjson.dumps({"id": "x", "episode_id": "e1", "timestamp": 1}), b"e1", "missing_name"),
        (orjson.dumps(SIGNAL), None, "missing_key"),
        (orjson.dumps(SIGNAL), b"other", "key_mismatch"),
        (b'{"pad": "' + b"x" * 2000 + b'"}', b"e1", "oversized"),
    ],
)
def test_bad_messages_become_dead_letters_with_the_original_bytes(
    value: bytes, key: bytes | None, reason: str
) -> None:
    sink = MemorySink()
    metrics = PipelineMetrics(process=False)
    pipeline = Pipeline([], sink, require_key=True, max_message_bytes=1000, metrics=metrics)
    env = Envelope("evalstream.signals", value, key=key, partition=3, offset=42, timestamp_ms=7)
    asyncio.run(pipeline.handle(env))
    [(_, letter)] = sink.records[DLQ]
    assert letter["reason"] == reason
    assert (letter["topic"], letter["partition"], letter["offset"]) == ("evalstream.signals", 3, 42)
    assert orjson.loads(json.dumps(letter))["value_b64"]
    assert base64.b64decode(letter["value_b64"]) == value
    assert (
        metrics.registry.get_sample_value("evalstream_signals_rejected_total", {"reason": reason})
        == 1.0
    )


def test_late_signal_goes_to_the_dead_letters_and_the_pipeline_keeps_going() -> None:
    sink = MemorySink()
    suite = load_suite(EXAMPLES[0] / "suite.yaml")
    pipeline = Pipeline([suite], sink, rules=None, clock=lambda: 0.0)
    end = {"id": "e", "episode_id": "ep", "name": "harness:end", "timestamp": 1000}
    after = {"id": "f", "episode_id": "ep", "name": "tool:call", "timestamp": 1001}

    async def scenario() -> None:
        await pipeline.handle(Envelope("signals", orjson.dumps(end), key=b"ep"))
        pipeline.clock = lambda: 10_000.0  # past the grace period
        await pipeline.tick()
        await pipeline.handle(Envelope("signals", orjson.dumps(after), key=b"ep", offset=9))
        await pipeline.handle(
            Envelope("signals", orjson.dumps({**SIGNAL, "episode_id": "n"}), key=b"n")
        )

    asyncio.run(scenario())
    assert [r["reason"] for _, r in sink.records[DLQ]] == ["late"]
    assert [k for k, _ in sink.records[EPISODES]] == ["ep"]
    assert "n" in pipeline.assembler.open


def test_metrics_after_a_known_input() -> None:
    example = REPO / "examples" / "code-review"
    metrics = PipelineMetrics(process=False)
    run = asyncio.run(
        run_embedded(
            [str(example / "episodes.jsonl")], [load_suite(example / "suite.yaml")], metrics=metrics
        )
    )
    value = metrics.registry.get_sample_value
    lines = sum(1 for line in (example / "episodes.jsonl").read_text().splitlines() if line.strip())
    assert value("evalstream_signals_consumed_total", {"source": "signals"}) == lines
    assert value("evalstream_episodes_closed_total", {"reason": "ended", "outcome": "passed"}) == 11
    assert value("evalstream_episodes_closed_total", {"reason": "ended", "outcome": "failed"}) == 4
    assert value("evalstream_open_episodes") == 0
    failed_not = value(
        "evalstream_verdicts_total",
        {
            "suite": "Code Review Agent Eval",
            "type": "agent.completed",
            "verdict": "fail",
            "early": "true",
        },
    )
    assert failed_not == 1  # the provider:error episode fails agent.completed at the error
    total = sum(
        s.value
        for m in metrics.registry.collect()
        if m.name == "evalstream_verdicts"
        for s in m.samples
        if s.name.endswith("_total")
    )
    assert total == sum(len(r.assertions) for r in run.results) == run.verdicts
    assert value("evalstream_early_verdict_lead_seconds_count", {"type": "agent.completed"}) == 1


def test_follow_mode_evaluates_lines_as_they_are_appended(tmp_path: Path) -> None:
    example = REPO / "examples" / "code-review"
    lines = (example / "episodes.jsonl").read_bytes().splitlines(keepends=True)[:22]
    target = tmp_path / "live.jsonl"
    target.write_bytes(b"")
    suites = [load_suite(example / "suite.yaml")]

    def writer() -> None:
        with target.open("ab") as handle:
            for line in lines:
                handle.write(line)
                handle.flush()
                time.sleep(0.005)

    async def scenario() -> tuple[int, bool]:
        run = EmbeddedRun()
        task = asyncio.create_task(run_embedded([str(target)], suites, follow=True, run=run))
        thread = threading.Thread(target=writer)
        thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not run.results:
            await asyncio.sleep(0.05)
        still_following = not task.done()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        thread.join()
        return len(run.results), still_following

    evaluated, still_following = asyncio.run(scenario())
    # The episode closed by the wall clock (2 s grace after harness:end) while the file was
    # still being followed: results are live, not produced at the end of the input.
    assert (evaluated, still_following) == (1, True)
