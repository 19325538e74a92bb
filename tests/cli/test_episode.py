"""`evalstream episode ID FILE...`: the drill-down of one episode from files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalstream.connectors.files.recording import RecordedMessage, RecordingWriter
from tests.cli.conftest import Run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-review"
SUITE = str(EXAMPLE / "suite.yaml")
EPISODES = EXAMPLE / "episodes.jsonl"
PROVIDER_ERROR = "cr-division-by-zero-fail-provider-error"  # agent.completed fails early
UNCAUSED = "cr-sql-injection-fail-uncaused"  # agent.causedBy fails at close


def signals_of(episode_id: str) -> list[dict[str, object]]:
    lines = EPISODES.read_text().splitlines()
    return [s for s in map(json.loads, lines) if s["episode_id"] == episode_id]


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    """The example episodes as `evalstream record` writes a signals topic."""
    path = tmp_path / "signals.jsonl.zst"
    with RecordingWriter(path, {"topic": "evalstream.signals"}) as writer:
        for offset, line in enumerate(EPISODES.read_bytes().splitlines()):
            key = json.loads(line)["episode_id"].encode()
            writer.write(RecordedMessage("evalstream.signals", 0, offset, 0, key, line))
    return path


def test_a_failed_assertion_is_shown_next_to_the_signal_that_decided_it(
    evalstream: Run, recording: Path
) -> None:
    proc = evalstream("episode", PROVIDER_ERROR, str(recording), "--suite", SUITE)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    error = next(s for s in signals_of(PROVIDER_ERROR) if s["name"] == "provider:error")
    at = next(
        i for i, line in enumerate(lines) if f"provider:error [reviewer]  {error['id']}" in line
    )
    assert lines[at + 1].split() == [
        "FAIL",
        "Code",
        "Review",
        "Agent",
        "Eval#4",
        "agent.completed:",
        "provider:error",
        f"({error['id']})",
        "attributed",
        "to",
        "reviewer",
    ]
    assert lines[at + 2].split() == ["payload:", "error=overloaded_error:", "Overloaded"]
    # every signal is on the timeline, in order, with its causal parent by name and id
    shown = [line.split()[1] for line in lines if line.strip().startswith("+")]
    assert shown == [s["name"] for s in signals_of(PROVIDER_ERROR)]
    fixer = next(
        s
        for s in signals_of(PROVIDER_ERROR)
        if s["name"] == "agent:activated" and s["source"]["agent"] == "fixer"  # type: ignore[index]
    )
    parent = fixer["source"]["parent"]  # type: ignore[index]
    assert any(
        f"agent:activated [fixer]  {fixer['id']}  ← review:complete {parent}" in line
        for line in lines
    ), proc.stdout
    assert "assertions: 5, 4 passed" in proc.stdout


def test_a_verdict_decided_at_close_is_listed_after_the_signals(
    evalstream: Run, recording: Path
) -> None:
    proc = evalstream("episode", UNCAUSED, str(recording), "--suite", SUITE)
    assert proc.returncode == 0, proc.stderr
    closing = proc.stdout.split("decided at close or by a signal not shown:")[1]
    assert "FAIL Code Review Agent Eval#7 agent.causedBy: no activation of fixer" in closing


def test_json_output_has_the_documented_shape(evalstream: Run) -> None:
    proc = evalstream(
        "episode", PROVIDER_ERROR, str(EPISODES), "--suite", SUITE, "--format", "json"
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {"episode_id", "source", "instances"}
    assert doc["episode_id"] == PROVIDER_ERROR
    [instance] = doc["instances"]
    first = signals_of(PROVIDER_ERROR)[0]["id"]
    assert instance["key"] == f"{PROVIDER_ERROR}@{first}"
    assert set(instance) == {
        "key",
        "first_signal",
        "status",
        "closed",
        "close_reason",
        "started_at",
        "ended_at",
        "attrs",
        "signals",
        "verdicts",
        "scores",
        "alerts",
    }
    assert (instance["status"], instance["closed"]) == ("failed", True)
    assert len(instance["signals"]) == len(signals_of(PROVIDER_ERROR))
    decided = [s for s in instance["signals"] if any(v["verdict"] != "pass" for v in s["verdicts"])]
    assert [(s["name"], [v["verdict"] for v in s["verdicts"]]) for s in decided] == [
        ("provider:error", ["fail"])
    ]
    verdict = decided[0]["verdicts"][0]
    assert verdict["decided_at"] == decided[0]["id"]
    assert verdict["decided_at_time"] == decided[0]["timestamp"]
    assert decided[0]["parent_name"] == "provider:start"
    assert decided[0]["detail"] == "error=overloaded_error: Overloaded"
    assert [s["detail"] for s in instance["signals"]].count(None) == len(instance["signals"]) - 1
    assert len(instance["verdicts"]) == 5


def test_a_results_file_and_its_signals_make_one_instance(evalstream: Run, tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    check = evalstream("check", "-s", SUITE, str(EPISODES), "-f", "json", "-o", str(results))
    assert check.returncode == 1, check.stderr  # the example has failing episodes
    alone = evalstream("episode", UNCAUSED, str(results))
    assert alone.returncode == 0, alone.stderr
    assert "signals: not available here" in alone.stdout
    assert "agent.causedBy: no activation of fixer" in alone.stdout
    both = json.loads(
        evalstream("episode", UNCAUSED, str(results), str(EPISODES), "-f", "json").stdout
    )
    [instance] = both["instances"]
    assert instance["first_signal"] == signals_of(UNCAUSED)[0]["id"]
    assert len(instance["signals"]) == len(signals_of(UNCAUSED))


def test_an_unknown_id_is_an_error_naming_where_it_looked(evalstream: Run) -> None:
    proc = evalstream("episode", "cr-no-such-episode", str(EPISODES), "--suite", SUITE)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"episode 'cr-no-such-episode' is not in {EPISODES}" in proc.stderr
    assert "'cr-sql-injection-pass'" in proc.stderr  # ids that are there


def test_signals_without_a_suite_ask_for_one(evalstream: Run) -> None:
    proc = evalstream("episode", UNCAUSED, str(EPISODES))
    assert proc.returncode == 2
    assert "no results; pass --suite SUITE.yaml" in proc.stderr


def test_an_unreachable_broker_is_an_error_naming_it(evalstream: Run) -> None:
    proc = evalstream("episode", UNCAUSED, "--broker", "127.0.0.1:1")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: cannot reach Kafka at 127.0.0.1:1:"), proc.stderr
    assert "--broker" in proc.stderr
    assert "Traceback" not in proc.stderr
