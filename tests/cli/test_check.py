"""`evalstream check`: the offline job's exit codes, formats and JSON contract."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
Run = Callable[..., subprocess.CompletedProcess[str]]

EXAMPLES = REPO / "examples"


def jsonl(records: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


START: dict[str, object] = {
    "id": "a1",
    "episode_id": "e1",
    "name": "harness:start",
    "timestamp": "2026-01-01T00:00:00Z",
    "attrs": {"case_id": "c"},
}
CALL: dict[str, object] = {
    "id": "a2",
    "episode_id": "e1",
    "name": "tool:call",
    "timestamp": 1767225600100,
    "payload": {"name": "Edit"},
}
ERROR: dict[str, object] = {
    "id": "a3",
    "episode_id": "e1",
    "name": "error:api",
    "timestamp": 1767225600150,
}
END: dict[str, object] = {
    "id": "a4",
    "episode_id": "e1",
    "name": "harness:end",
    "timestamp": "2026-01-01T00:00:00.200Z",
    "payload": {"output": "ok"},
}
PASSING = jsonl([START, CALL, END])
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
      - type: output.contains
        text: ok
"""


def files(tmp_path: Path, signals: str, suite: str = SUITE) -> tuple[str, str]:
    (tmp_path / "suite.yaml").write_text(suite)
    (tmp_path / "run.jsonl").write_text(signals)
    return str(tmp_path / "suite.yaml"), str(tmp_path / "run.jsonl")


def test_all_pass_exits_zero_with_the_json_contract(evalstream: Run, tmp_path: Path) -> None:
    suite, run = files(tmp_path, PASSING)
    proc = evalstream("check", "--suite", suite, run, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) >= {"episodes", "summary"}
    [episode] = report["episodes"]
    assert set(episode) >= {
        "episode_id",
        "case_id",
        "passed",
        "close_reason",
        "signals",
        "assertions",
    }
    assert (episode["episode_id"], episode["case_id"], episode["passed"]) == ("e1", "c", True)
    assert (episode["close_reason"], episode["signals"]) == ("ended", 3)
    assert [a["index"] for a in episode["assertions"]] == [0, 1, 2]
    assert [a["type"] for a in episode["assertions"]] == [
        "signal.not",
        "tool.called",
        "output.contains",
    ]
    for a in episode["assertions"]:
        assert set(a) >= {"index", "type", "verdict", "message", "decided_at"}
        assert a["verdict"] == "pass"
    assert episode["assertions"][1]["decided_at"] == "a2"  # decided early, at the tool call
    assert episode["assertions"][2]["decided_at"] is None  # output: decided at close
    assert report["summary"] == report["summary"] | {
        "episodes": 1,
        "passed": 1,
        "failed": 0,
        "errors": 0,
    }


def test_a_failure_exits_one_and_names_the_deciding_signal(evalstream: Run, tmp_path: Path) -> None:
    failing = jsonl([START, CALL, ERROR, END])
    suite, run = files(tmp_path, failing)
    proc = evalstream("check", "-s", suite, run, "-f", "json")
    assert proc.returncode == 1
    [episode] = json.loads(proc.stdout)["episodes"]
    first = episode["assertions"][0]
    assert (first["verdict"], first["decided_at"]) == ("fail", "a3")
    assert episode["passed"] is False


def test_a_judge_without_a_judge_is_an_error_not_a_pass(evalstream: Run, tmp_path: Path) -> None:
    suite_text = (
        "name: j\ndefaultAssertions:\n"
        "  - type: llm.judge\n    criteria: [correct]\n    minScore: 0.5\n"
    )
    suite, run = files(tmp_path, PASSING, suite_text)
    proc = evalstream("check", "-s", suite, run, "-f", "json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["episodes"][0]["assertions"][0]["verdict"] == "error"
    assert report["summary"]["errors"] == 1


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "invalid_json"),
        ('["a list"]', "not_an_object"),
        ('{"id":"x","episode_id":"e1","timestamp":1}', "missing_name"),
        ('{"id":"x","name":"tool:call","timestamp":1}', "missing_episode_id"),
        (
            '{"id":"x","episode_id":"e1","name":"tool:call","timestamp":"yesterday"}',
            "bad_timestamp",
        ),
    ],
)
def test_bad_lines_are_reported_and_the_rest_is_evaluated(
    evalstream: Run, tmp_path: Path, line: str, reason: str
) -> None:
    suite, run = files(tmp_path, PASSING.replace("\n", f"\n{line}\n", 1))
    proc = evalstream("check", "-s", suite, run, "-f", "json")
    assert proc.returncode == 2, "input that could not be evaluated is never a clean pass"
    report = json.loads(proc.stdout)
    assert report["episodes"][0]["passed"] is True
    [rejected] = report["rejected"]
    assert (rejected["line"], rejected["reason"]) == (2, reason)
    assert report["summary"]["rejected_signals"] == 1


def test_an_empty_recording_evaluates_nothing_and_exits_two(
    evalstream: Run, tmp_path: Path
) -> None:
    suite, run = files(tmp_path, "")
    proc = evalstream("check", "-s", suite, run, "-f", "json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["summary"]["episodes"] == 0  # the report is still written
    assert proc.stderr == (
        "error: nothing was evaluated: the input holds no episode (an empty file or stdin?); "
        "pass --allow-empty if that is expected\n"
    )
    allowed = evalstream("check", "-s", suite, run, "--allow-empty")
    assert allowed.returncode == 0, allowed.stderr


def test_a_match_or_case_id_typo_that_evaluates_nothing_names_the_cause(
    evalstream: Run, tmp_path: Path
) -> None:
    attrs = {"agent_id": "support-bot", "case_id": "c"}
    episodes = jsonl(
        [
            {**signal, "id": f"{i}{signal['id']}", "episode_id": f"e{i}"}
            | ({"attrs": attrs} if "attrs" in signal else {})
            for i in range(3)
            for signal in (START, CALL, END)
        ]
    )
    typo = SUITE.replace("name: tiny\n", "name: tiny\nmatch: {agent_id: suport-bot}\n")
    suite, run = files(tmp_path, episodes, typo)
    proc = evalstream("check", "-s", suite, run)
    assert proc.returncode == 2, proc.stdout
    assert "0 unevaluated" not in proc.stdout
    assert "3 unevaluated of 3 episodes" in proc.stdout
    assert "error: nothing was evaluated: 3 episode(s), none with an applicable assertion" in (
        proc.stderr
    )
    assert "`match:`" in proc.stderr
    assert "agent_id='support-bot'" in proc.stderr
    assert "--allow-empty" in proc.stderr
    no_defaults = "name: tiny\ncases:" + SUITE.split("cases:", maxsplit=1)[1]
    suite, run = files(tmp_path, PASSING.replace('"case_id": "c"', '"case_id": "C"'), no_defaults)
    proc = evalstream("check", "-s", suite, run)
    assert proc.returncode == 2, proc.stdout
    assert "case_id(s) 'C' match no case of the suites" in proc.stderr
    assert evalstream("check", "-s", suite, run, "--allow-empty").returncode == 0


def test_usage_errors_exit_two_without_traceback(evalstream: Run, tmp_path: Path) -> None:
    suite, run = files(tmp_path, PASSING, "name: s\ndefaultAssertions:\n  - type: signal.nope\n")
    proc = evalstream("check", "-s", suite, run)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert (
        f"error: {suite}:3:11: defaultAssertions[0].type: unknown assertion type 'signal.nope'"
        in proc.stderr
    )

    missing = evalstream("check", "-s", suite, str(tmp_path / "absent.jsonl"))
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr

    no_args = evalstream("check")
    assert no_args.returncode == 2


def test_stdin_and_out_file_and_other_formats(evalstream: Run, tmp_path: Path) -> None:
    suite, _ = files(tmp_path, PASSING)
    out = tmp_path / "report.xml"
    proc = evalstream("check", "-s", suite, "-", "-f", "junit", "-o", str(out), stdin=PASSING)
    assert proc.returncode == 0, proc.stderr
    root = ET.fromstring(out.read_text())
    assert root.get("tests") == "1"
    assert root.get("failures") == "0"

    md = evalstream("check", "-s", suite, "-", "-f", "markdown", stdin=PASSING)
    assert md.returncode == 0
    assert "**1/1 episodes passed**" in md.stdout

    table = evalstream("check", "-s", suite, "-", stdin=PASSING)
    assert table.returncode == 0
    assert "1 passed, 0 failed" in table.stdout


def test_seed_shaped_signals_take_the_episode_id_from_the_option(
    evalstream: Run, tmp_path: Path
) -> None:
    seed_shaped = "".join(
        json.dumps({"id": f"s{i}", "name": name, "payload": payload, "timestamp": 1000 + i}) + "\n"
        for i, (name, payload) in enumerate(
            [
                ("harness:start", {}),
                ("tool:call", {"name": "Edit"}),
                ("harness:end", {"output": "ok"}),
            ]
        )
    )
    suite_text = "name: s\ndefaultAssertions:\n  - type: tool.called\n    name: Edit\n"
    suite, run = files(tmp_path, seed_shaped, suite_text)
    proc = evalstream("check", "-s", suite, run, "--episode-id", "run-7", "-f", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["episodes"][0]["episode_id"] == "run-7"


def test_schema_command_prints_a_json_schema(evalstream: Run) -> None:
    proc = evalstream("schema")
    assert proc.returncode == 0
    schema = json.loads(proc.stdout)
    types = {v["properties"]["type"]["const"] for v in schema["$defs"]["AssertionSpec"]["oneOf"]}
    assert {"signal.trajectory", "llm.judge", "metric.cost.max", "not"} <= types


def expected() -> dict[str, dict[str, dict[str, object]]]:
    data: dict[str, dict[str, dict[str, object]]] = json.loads(
        (EXAMPLES / "expected.json").read_text()
    )
    return data


@pytest.mark.parametrize("suite_dir", sorted(expected()))
def test_examples_behave_as_their_cases_describe(evalstream: Run, suite_dir: str) -> None:
    proc = evalstream(
        "check",
        "-s",
        str(EXAMPLES / suite_dir / "suite.yaml"),
        str(EXAMPLES / suite_dir / "episodes.jsonl"),
        "-f",
        "json",
    )
    report = json.loads(proc.stdout)
    got = {e["episode_id"]: e for e in report["episodes"]}
    want = expected()[suite_dir]
    assert set(got) == set(want)
    for episode_id, spec in want.items():
        episode = got[episode_id]
        failing = [a["index"] for a in episode["assertions"] if a["verdict"] != "pass"]
        assert (episode["passed"], failing) == (spec["passed"], spec["failing"]), (
            episode_id,
            spec["why"],
        )
        assert episode["close_reason"] == "ended"
    assert proc.returncode == (0 if all(s["passed"] for s in want.values()) else 1)
