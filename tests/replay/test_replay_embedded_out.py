"""`evalstream replay --into embedded --out`: the replayed episodes' records as JSON lines,
the ones the worker publishes for the same signals."""

from __future__ import annotations

from pathlib import Path

import orjson

from evalstream.assertions.suite_format.suites import load_suite
from tests.replay.helpers import REPO, cli
from tests.replay.test_replay_offline import EXAMPLE, recording_of_example
from tests.support.worker_records import by_dedupe_key, worker_records

REPLAY = ("replay", "--into", "embedded", "--suite", str(EXAMPLE / "suite.yaml"))


def test_out_dash_writes_the_worker_records_to_stdout_and_the_rest_to_stderr(
    tmp_path: Path,
) -> None:
    recording = tmp_path / "rec.jsonl"
    recording_of_example(recording)
    proc = cli(*REPLAY, "--out", "-", str(recording))
    assert proc.returncode == 1, proc.stderr  # four example episodes fail by design
    written = [orjson.loads(line) for line in proc.stdout.splitlines()]
    expected = worker_records(EXAMPLE / "episodes.jsonl", [load_suite(EXAMPLE / "suite.yaml")])
    assert by_dedupe_key(written) == by_dedupe_key(expected)
    assert "11 passed, 4 failed" in proc.stderr
    assert "cr-sql-injection-fail-missed (sql-injection) failed" in proc.stderr


def test_out_file_takes_the_records_and_stdout_keeps_the_console(tmp_path: Path) -> None:
    recording = tmp_path / "rec.jsonl"
    recording_of_example(recording)
    out = tmp_path / "records.jsonl"
    proc = cli(*REPLAY, "--episode-prefix", "again-", "--out", str(out), str(recording))
    assert proc.returncode == 1, proc.stderr
    episodes = [
        record
        for record in map(orjson.loads, out.read_bytes().splitlines())
        if record["stream"] == "episodes"
    ]
    assert len(episodes) == 15
    assert all(e["episode_id"].startswith("again-") for e in episodes)
    assert "11 passed, 4 failed" in proc.stdout


def test_into_check_out_dash_is_the_report_on_stdout(tmp_path: Path) -> None:
    recording = tmp_path / "rec.jsonl"
    recording_of_example(recording)
    proc = cli(
        "replay", "--suite", str(EXAMPLE / "suite.yaml"), "-f", "json", "--out", "-", str(recording)
    )
    assert proc.returncode == 1, proc.stderr
    assert orjson.loads(proc.stdout)["summary"]["failed"] == 4
    assert not (REPO / "-").exists()  # not a file named `-`
