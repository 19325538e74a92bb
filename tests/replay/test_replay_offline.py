"""Replays without a broker: recordings into check and the embedded runtime; pacing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import orjson
import pytest

from evalstream.assertions.suite_format.suites import load_suite
from evalstream.connectors.files.recording import RecordedMessage, RecordingWriter
from evalstream.stream.offline import check_files
from evalstream.stream.recordings.replay import (
    CONTROL_PREFIX,
    FileSource,
    Pacer,
    PipelineTarget,
    replay,
)
from tests.replay.helpers import REPO, cli

EXAMPLE = REPO / "examples" / "code-review"


def recording_of_example(path: Path) -> int:
    """The example's signals as a worker's topic would hold them, plus a control record."""
    lines = [line for line in (EXAMPLE / "episodes.jsonl").read_bytes().splitlines() if line]
    with RecordingWriter(path, {"topic": "evalstream.signals"}) as writer:
        for offset, line in enumerate(lines):
            episode = orjson.loads(line)["episode_id"]
            writer.write(
                RecordedMessage(
                    "evalstream.signals", 0, offset, 1_700_000_000_000, episode.encode(), line
                )
            )
        control = {"name": "evalstream:close", "episode_id": episode, "reason": "ended"}
        writer.write(
            RecordedMessage(
                "evalstream.signals", 0, len(lines), 1, episode.encode(), orjson.dumps(control)
            )
        )
    return len(lines)


def test_replay_into_check_equals_check_on_the_source(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl.zst"
    recording_of_example(path)
    proc = cli("replay", str(path), "--suite", str(EXAMPLE / "suite.yaml"), "--format", "json")
    assert proc.returncode == 1, proc.stderr  # four example episodes fail by design
    got = json.loads(proc.stdout)
    expected = check_files(
        [str(EXAMPLE / "episodes.jsonl")], [load_suite(EXAMPLE / "suite.yaml")]
    ).to_json()
    assert got == expected


def test_replay_into_embedded_prints_results_live(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    recording_of_example(path)
    proc = cli(
        "replay",
        str(path),
        "--into",
        "embedded",
        "--suite",
        str(EXAMPLE / "suite.yaml"),
        "--episode-prefix",
        "again-",
    )
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("again-")]
    assert sum(" passed:" in line for line in lines) == 11
    assert sum(" failed:" in line for line in lines) == 4
    assert "11 passed, 4 failed" in proc.stdout


def test_control_records_are_not_input_offline(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    n = recording_of_example(path)
    target = PipelineTarget([load_suite(EXAMPLE / "suite.yaml")])
    summary = asyncio.run(replay(FileSource([path]), target))
    assert (summary.sent, summary.control_dropped) == (n, 1)
    assert target.report().summary.episodes == 15
    assert CONTROL_PREFIX.startswith(
        b'{"name":"'
    )  # evalstream.stream.kafka_worker.app writes "name" first
    from evalstream.stream.kafka_worker.partition_feed import CONTROL_NAME  # noqa: PLC0415 - the worker writes them

    assert b'{"name":"' + CONTROL_NAME.encode() + b'"' == CONTROL_PREFIX


def test_pacer_keeps_the_original_timing_at_a_speed_factor() -> None:
    now = [100.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))
        now[0] += seconds

    async def run(speed: float | None, stamps: list[int]) -> None:
        pacer = Pacer(speed, clock=lambda: now[0], sleep=sleep)
        for ts in stamps:
            await pacer.wait(ts)
            now[0] += 0.1  # sending takes time; the schedule absorbs it

    asyncio.run(run(2.0, [10_000, 11_000, 11_000, 15_000, 14_000]))
    # Due at +0.5 s and +2.5 s after the first message; 0.1 s per send already passed.
    assert slept == [0.4, 1.8]
    slept.clear()
    asyncio.run(run(None, [0, 60_000]))
    assert slept == []


def test_a_halted_pacer_stops_waiting() -> None:
    async def run() -> float:
        halt = asyncio.Event()
        pacer = Pacer(0.001)
        await pacer.wait(0, halt)
        asyncio.get_running_loop().call_soon(halt.set)
        await pacer.wait(3_600_000, halt)  # an hour at 1/1000 speed: returns when halted
        return 1.0

    assert asyncio.run(asyncio.wait_for(run(), 10)) == 1.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give recording files or --from-topic TOPIC"),
        (["--into", "topic"], "--into topic needs --topic NAME"),
        (["--into", "check"], "pass --suite FILE"),
        (["--speed", "0"], "--speed 0.0: use a factor > 0"),
    ],
)
def test_replay_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    path = tmp_path / "rec.jsonl"
    recording_of_example(path)
    proc = cli("replay", *([str(path)] if args else []), *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_replay_of_an_empty_recording_exits_two_unless_allowed(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text("")
    suite = str(EXAMPLE / "suite.yaml")
    proc = cli("replay", str(path), "--suite", suite, "--format", "json")
    assert proc.returncode == 2
    assert "error: nothing was evaluated: the input holds no episode" in proc.stderr
    assert "--allow-empty" in proc.stderr
    allowed = cli("replay", str(path), "--suite", suite, "--allow-empty", "--format", "json")
    assert allowed.returncode == 0, allowed.stderr


def test_a_broken_recording_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text('{"topic": "t"}\n')
    proc = cli("replay", str(path), "--suite", str(EXAMPLE / "suite.yaml"))
    assert proc.returncode == 2
    assert f"{path}:1: `partition` must be an integer" in proc.stderr
