"""Signals with values past the limits (docs/signals.md), through `check` and `up` (a file and
stdin): the line is rejected with its reason, every other episode is reported as without it,
and nothing dies with a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Run

SUITE = """name: tiny
defaultAssertions:
  - type: signal.not
    pattern: "error:*"
cases:
  - id: c
    input: {}
    assertions:
      - type: tool.called
        name: Edit
"""
T0 = 1_767_225_600_000


def episode(eid: str, t0: int, **poison: Any) -> list[dict[str, Any]]:
    return [
        {"id": f"{eid}-1", "episode_id": eid, "name": "harness:start", "timestamp": t0,
         "attrs": {"case_id": "c"}},
        {"id": f"{eid}-2", "episode_id": eid, "name": "tool:call", "timestamp": t0 + 100,
         "payload": {"name": "Edit"}, **poison},
        {"id": f"{eid}-3", "episode_id": eid, "name": "harness:end", "timestamp": t0 + 200},
    ]  # fmt: skip


POISONS: dict[str, tuple[dict[str, Any], str]] = {
    "timestamp 1e308": ({"timestamp": 1e308}, "timestamp_out_of_range"),
    "timestamp -1e308": ({"timestamp": -1e308}, "timestamp_out_of_range"),
    "timestamp 1e20": ({"timestamp": 1e20}, "timestamp_out_of_range"),
    "100k episode id": ({"episode_id": "x" * 100_000}, "id_too_long"),
    "NUL in episode id": ({"episode_id": "a\x00b"}, "bad_id_character"),
}
GOOD = episode("good1", T0) + episode("good2", T0 + 1000)


def jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def mixed(poison: dict[str, Any]) -> str:
    bad = episode("bad", T0 + 500, **poison)
    return jsonl(episode("good1", T0) + bad + episode("good2", T0 + 1000))


@pytest.fixture
def suite(tmp_path: Path) -> str:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    return str(path)


def check_json(evalstream: Run, suite: str, path: Path) -> tuple[int, dict[str, Any]]:
    done = evalstream("check", "--suite", suite, "--format", "json", str(path))
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize(("poison", "reason"), POISONS.values(), ids=list(POISONS))
def test_check_rejects_the_line_and_reports_every_other_episode(
    evalstream: Run, suite: str, tmp_path: Path, poison: dict[str, Any], reason: str
) -> None:
    alone, poisoned = tmp_path / "alone.jsonl", tmp_path / "poisoned.jsonl"
    alone.write_text(jsonl(GOOD))
    poisoned.write_text(mixed(poison))
    _, expected = check_json(evalstream, suite, alone)
    code, report = check_json(evalstream, suite, poisoned)
    assert code == 2  # rejected input never yields a clean pass
    assert [r["reason"] for r in report["rejected"]][:1] == [reason]
    good = [e for e in report["episodes"] if e["episode_id"].startswith("good")]
    assert good == expected["episodes"]


@pytest.mark.parametrize(("poison", "reason"), POISONS.values(), ids=list(POISONS))
def test_check_on_a_file_of_one_such_line_reports_it(
    evalstream: Run, suite: str, tmp_path: Path, poison: dict[str, Any], reason: str
) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(jsonl([episode("bad", T0, **poison)[1]]))
    code, report = check_json(evalstream, suite, path)
    assert code == 2
    assert [r["reason"] for r in report["rejected"]] == [reason]
    assert report["rejected"][0]["line"] == 1


@pytest.mark.parametrize("case", POISONS.values(), ids=list(POISONS))
@pytest.mark.parametrize("source", ["file", "stdin"])
def test_up_dead_letters_the_signal_and_prints_every_other_episode(
    evalstream: Run, suite: str, tmp_path: Path, source: str, case: tuple[dict[str, Any], str]
) -> None:
    poison, reason = case
    path = tmp_path / "poisoned.jsonl"
    path.write_text(mixed(poison))
    args = ("up", "--suite", suite, "--metrics-port", "0", "--grace-ms", "0")
    if source == "file":
        done = evalstream(*args, str(path))
    else:
        done = evalstream(*args, "-", stdin=path.read_text())
    out = done.stdout + done.stderr
    assert "Traceback" not in out, out
    assert done.returncode == 2, out  # dead letters
    assert "good1 (c) passed: 2/2 assertions, ended" in out
    assert "good2 (c) passed: 2/2 assertions, ended" in out
    assert f"dead letter ({reason})" in out
