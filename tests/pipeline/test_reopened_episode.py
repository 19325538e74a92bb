"""An episode id that opens again after its episode closed is another episode: its records
never share a `dedupe_key` with the first one's, while a repeat of the same input does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from evalstream.assertions.evaluation.assembly import CloseRules
from evalstream.assertions.suite_format.suites import load_suite
from evalstream.stream.pipeline import ALERTS, EPISODES, VERDICTS, Envelope, MemorySink, Pipeline

SUITE = """name: reopen
defaultAssertions:
  - type: signal.trajectory
    patterns: [harness:start, "tool:call", harness:end]
"""


def signal(sig_id: str, name: str, ts: int) -> Envelope:
    wire = {"id": sig_id, "episode_id": "ep", "name": name, "timestamp": ts}
    return Envelope("signals", orjson.dumps(wire), key=b"ep")


def run(instances: list[list[Envelope]], closed_memory: int, tmp_path: Path) -> MemorySink:
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    sink = MemorySink()
    pipeline = Pipeline([load_suite(suite)], sink, rules=CloseRules(grace_ms=0))
    pipeline.assembler.closed_memory = closed_memory  # forgets closed ids past this many

    async def scenario() -> None:
        for envs in instances:
            for env in envs:
                await pipeline.handle(env)

    asyncio.run(scenario())
    return sink


FIRST = [
    signal("a1", "harness:start", 1),
    signal("a2", "tool:call", 2),
    signal("a3", "harness:end", 3),
]
AGAIN = [signal("b1", "harness:start", 10), signal("b2", "harness:end", 11)]


def keys(sink: MemorySink, stream: str) -> list[str]:
    return [record["dedupe_key"] for _, record in sink.records[stream]]


def test_a_reopened_episode_id_gets_distinct_dedupe_keys(tmp_path: Path) -> None:
    sink = run([FIRST, AGAIN], closed_memory=0, tmp_path=tmp_path)
    first, again = (record for _, record in sink.records[EPISODES])
    assert first["episode_id"] == again["episode_id"] == "ep"
    assert first["signals"] == 3
    assert again["signals"] == 2
    assert (first["dedupe_key"], again["dedupe_key"]) == ("ep@a1", "ep@b1")
    verdicts = keys(sink, VERDICTS)
    assert len(verdicts) == len(set(verdicts)) > 0
    assert [k.split("/")[0] for k in sorted(verdicts)] == ["ep@a1", "ep@b1"]
    passed = [record["verdict"] for _, record in sink.records[VERDICTS]]
    assert passed == ["pass", "fail"]  # two different records: never under one key
    alerts = keys(sink, ALERTS)
    assert len(alerts) == len(set(alerts))


def test_the_same_input_again_gives_the_same_keys_and_records(tmp_path: Path) -> None:
    once = run([FIRST], closed_memory=100, tmp_path=tmp_path)
    twice = run([FIRST], closed_memory=100, tmp_path=tmp_path)
    assert once.records == twice.records
