"""`evalstream up --out`: the episode and verdict records as JSON lines, the very records the
Kafka worker's pipeline publishes for the same input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from evalstream.assertions.suite_format.suites import load_suite
from tests.cli.conftest import REPO, Run
from tests.support.worker_records import by_dedupe_key, worker_records

EXAMPLE = REPO / "examples" / "code-review"
UP = ("up", "--suite", str(EXAMPLE / "suite.yaml"), "--metrics-port", "0")


def test_out_file_holds_the_records_the_worker_publishes(evalstream: Run, tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    done = evalstream(*UP, "--out", str(out), str(EXAMPLE / "episodes.jsonl"))
    assert done.returncode == 1, done.stderr  # the example holds failing episodes on purpose
    written = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    expected = worker_records(EXAMPLE / "episodes.jsonl", [load_suite(EXAMPLE / "suite.yaml")])
    assert {r["stream"] for r in written} == {"verdicts", "episodes"}
    assert by_dedupe_key(written) == by_dedupe_key(expected)
    # The console still prints its lines and summary on stdout.
    assert "4 failed" in done.stdout


def test_out_dash_writes_only_json_lines_to_stdout(evalstream: Run) -> None:
    done = evalstream(*UP, "--out", "-", str(EXAMPLE / "episodes.jsonl"))
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    records = [orjson.loads(line) for line in lines]  # every line parses alone
    episodes = [r for r in records if r["stream"] == "episodes"]
    assert len(episodes) == 15
    assert sum(1 for r in records if r["stream"] == "verdicts") == len(records) - 15
    # The console output moved to stderr.
    assert "11 passed, 4 failed" in done.stderr
    assert "cr-sql-injection-fail-missed (sql-injection) failed" in done.stderr


def test_out_with_kafka_is_refused_with_the_alternative(evalstream: Run) -> None:
    done = evalstream(*UP, "--kafka", "localhost:1", "--out", "-", str(EXAMPLE / "episodes.jsonl"))
    assert done.returncode == 2
    assert "evalstream record" in done.stderr


def test_an_unwritable_out_file_is_an_input_error(evalstream: Run, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "records.jsonl"
    done = evalstream(*UP, "--out", str(missing), str(EXAMPLE / "episodes.jsonl"))
    assert done.returncode == 2
    assert f"cannot write the records to {missing}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_reader_that_stops_early_does_not_break_the_run() -> None:
    """`up --out - | head`: the records after the reader left are dropped; the run ends as
    usual, with its summary on stderr and no traceback."""
    exe = Path(sys.executable).parent / "evalstream"
    with subprocess.Popen(
        [str(exe), *UP, "--out", "-", str(EXAMPLE / "episodes.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        proc.stdout.close()  # as `head` exits; before the first record: every write fails
        stderr = proc.stderr.read().decode()
        returncode = proc.wait(timeout=120)
    assert returncode == 1, stderr  # the example's failing episodes, as without a reader
    assert "11 passed, 4 failed" in stderr
    assert "Traceback" not in stderr
    assert "BrokenPipeError" not in stderr


def test_a_failed_write_is_reported_with_the_records_lost(evalstream: Run) -> None:
    done = evalstream(*UP, "--out", "/dev/full", str(EXAMPLE / "episodes.jsonl"))
    assert done.returncode == 2
    lost = len(worker_records(EXAMPLE / "episodes.jsonl", [load_suite(EXAMPLE / "suite.yaml")]))
    assert (
        "error: cannot write the records to /dev/full: No space left on device; "
        f"{lost} records were not written"
    ) in done.stderr
    assert "Traceback" not in done.stderr
    assert "cr-sql-injection-fail-missed (sql-injection) failed" in done.stdout
