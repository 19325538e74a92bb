"""A file given to the wrong command: one error naming the kind it looks like and the command
that reads it, instead of one rejection per record; the right command still reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evalstream.connectors.files.recording import RecordedMessage, RecordingWriter
from tests.cli.conftest import REPO, Run
from tests.scoring.episodes import make_episode

EXAMPLES = REPO / "examples"
SUITE = EXAMPLES / "code-review" / "suite.yaml"
SIGNALS = EXAMPLES / "code-review" / "episodes.jsonl"
HARNESS_SUITE = EXAMPLES / "eval-harness" / "eval-suite.yaml"
HARNESS_EVAL = EXAMPLES / "eval-harness" / "capability" / "string-processing.yaml"
HARNESS_ITEMS = EXAMPLES / "eval-harness" / "regression" / "quality.yaml"
REVIEWS = EXAMPLES / "eval-harness" / "reviews.json"
SKILL = EXAMPLES / "skill-evals"
DATASET = EXAMPLES / "agent" / "dataset.yaml"
AGENT = "examples/agent/support_agent.py:run"

CHECK = "`evalstream check`"
SCORE = "`evalstream score`"
REPLAY = "`evalstream replay`"
REPORT = "`evalstream report`"
SUITES = "`evalstream check --suite` and `evalstream eval`"
RUNS = "`evalstream compare`, `eval --baseline`, `report` and `eval-report`"
PYTHON = "the Python API"
HARNESS = "`evalstream harness run`"


def run_command(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "evalstream"
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One file of each kind; the generated ones written by the commands that write them."""
    out = tmp_path_factory.mktemp("kinds")
    episodes = [make_episode(f"ep-{i}") for i in range(3)]
    store = out / "export.ndjson"
    store.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    store_json = out / "episodes.json"
    store_json.write_text(json.dumps(episodes, indent=2))
    recording = out / "signals.jsonl.zst"
    with RecordingWriter(recording, {"topic": "evalstream.signals"}) as writer:
        for offset, line in enumerate(SIGNALS.read_bytes().splitlines()):
            key = json.loads(line)["episode_id"].encode()
            writer.write(RecordedMessage("evalstream.signals", 0, offset, 1, key, line))
    score_run = out / "score-run.json"
    scored = run_command("score", str(store), "--no-baseline", "--output", str(score_run))
    assert scored.returncode == 0, scored.stderr
    dataset_run = out / "dataset-run.json"
    ran = run_command(
        "eval", str(DATASET), "--target", AGENT, "--no-progress", "--out", str(dataset_run)
    )
    assert ran.returncode == 0, ran.stderr
    unknown = out / "unknown.json"
    unknown.write_text('{"colour": "blue", "size": 3}\n')
    return {
        "signals": SIGNALS,
        "store": store,
        "store-json": store_json,
        "recording": recording,
        "score-run": score_run,
        "dataset-run": dataset_run,
        "suite": SUITE,
        "harness-suite": HARNESS_SUITE,
        "harness-eval": HARNESS_EVAL,
        "harness-items": HARNESS_ITEMS,
        "reviews": REVIEWS,
        "unknown": unknown,
        **{f"skill-{name}": SKILL / f"{name}.json" for name in SKILL_FILES},
    }


SKILL_FILES = ("evals", "grading", "history", "comparison", "analysis")

# (command line with FILE for the wrong file, file kind, what it looks like, who reads it)
PAIRINGS = [
    # signals given to the commands of other kinds
    (["score", "FILE", "--no-baseline"], "signals", "signal JSONL", CHECK),
    (["report", "FILE"], "signals", "signal JSONL", CHECK),
    (["eval", "FILE", "--target", AGENT], "signals", "signal JSONL", CHECK),
    (["compare", "FILE", "FILE"], "signals", "signal JSONL", CHECK),
    (["eval-report", "FILE"], "signals", "signal JSONL", CHECK),
    (["replay", "--suite", str(SUITE), "FILE"], "signals", "signal JSONL", CHECK),
    (["check", "--suite", "FILE", str(SIGNALS)], "signals", "signal JSONL", CHECK),
    # an episode-store export (NDJSON or a JSON list)
    (["check", "--suite", str(SUITE), "FILE"], "store", "an episode-store export", SCORE),
    (["check", "--suite", str(SUITE), "FILE"], "store-json", "an episode-store export", SCORE),
    (["replay", "--suite", str(SUITE), "FILE"], "store", "an episode-store export", SCORE),
    (["eval", "FILE", "--target", AGENT], "store-json", "an episode-store export", SCORE),
    (["compare", "FILE", "FILE"], "store-json", "an episode-store export", SCORE),
    (["report", "FILE"], "store-json", "an episode-store export", SCORE),
    # eval-harness suites and eval files (the Python API reads them)
    (["check", "--suite", str(SUITE), "FILE"], "harness-suite", "an eval-harness suite", HARNESS),
    (["check", "--suite", "FILE", str(SIGNALS)], "harness-suite", "an eval-harness suite", HARNESS),
    (["eval", "FILE", "--target", AGENT], "harness-suite", "an eval-harness suite", HARNESS),
    (["score", "FILE"], "harness-suite", "an eval-harness suite", HARNESS),
    (["check", "--suite", str(SUITE), "FILE"], "harness-eval", "an eval-harness eval", HARNESS),
    (["eval", "FILE", "--target", AGENT], "harness-items", "an eval-harness eval", HARNESS),
    # skill-eval files (the Python API reads them)
    *[
        (["check", "--suite", str(SUITE), "FILE"], f"skill-{name}", f"{name}.json", PYTHON)
        for name in SKILL_FILES
    ],
    (["score", "FILE"], "skill-grading", "a skill-eval grading.json", PYTHON),
    (["eval", "FILE", "--target", AGENT], "skill-evals", "a skill-eval evals.json", PYTHON),
    # saved runs: a dataset run and a score run
    (["check", "--suite", str(SUITE), "FILE"], "dataset-run", "a saved dataset run", RUNS),
    (["score", "FILE", "--no-baseline"], "dataset-run", "a saved dataset run", RUNS),
    (["check", "--suite", str(SUITE), "FILE"], "score-run", "a score run", REPORT),
    (["compare", "FILE", "FILE"], "score-run", "a score run", REPORT),
    # a suite given as a recording, a recording given as signals, a review queue
    (["check", "--suite", str(SUITE), "FILE"], "suite", "an evalstream suite", SUITES),
    (["replay", "--suite", str(SUITE), "FILE"], "suite", "an evalstream suite", SUITES),
    (["score", "FILE"], "suite", "an evalstream suite", SUITES),
    (["check", "--suite", str(SUITE), "FILE"], "recording", "a topic recording", REPLAY),
    (["check", "--suite", str(SUITE), "FILE"], "reviews", "a review queue", "`evalstream review`"),
    # the embedded runtime and the eval-harness command
    (["up", "--suite", str(SUITE), "FILE"], "store", "an episode-store export", SCORE),
    (["up", "--suite", str(SUITE), "FILE"], "harness-suite", "an eval-harness suite", HARNESS),
    (["harness", "run", "--suite", "FILE", "--outputs", "FILE"], "signals", "signal JSONL", CHECK),
    (
        ["harness", "run", "--suite", "FILE", "--outputs", "FILE"],
        "suite",
        "an evalstream suite",
        SUITES,
    ),
]


@pytest.mark.parametrize(
    "pairing", PAIRINGS, ids=[f"{kind}->{args[0]}" for args, kind, _, _ in PAIRINGS]
)
def test_a_file_of_another_kind_names_the_command_that_reads_it(
    evalstream: Run, files: dict[str, Path], pairing: tuple[list[str], str, str, str]
) -> None:
    args, kind, looks_like, reader = pairing
    path = str(files[kind])
    proc = evalstream(*[path if a == "FILE" else a for a in args])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # one error, not one per record
    (error,) = lines
    assert error.startswith(f"error: {path} looks like "), error
    assert looks_like in error
    assert f"are read by {reader}" in error
    assert "rejected" not in proc.stdout


def test_the_fix_names_the_file_with_the_command_that_reads_it(
    evalstream: Run, files: dict[str, Path]
) -> None:
    store = files["store"]
    proc = evalstream("check", "--suite", str(SUITE), str(store))
    assert f"run `evalstream score {store}`" in proc.stderr
    assert "while this command reads signal JSONL files" in proc.stderr
    skill = files["skill-grading"]
    proc = evalstream("check", "--suite", str(SUITE), str(skill))
    assert f"`evalstream.assertions.skill_evals.models.load(GradingFile, '{skill}')`" in proc.stderr


def test_nightly_names_check_for_signal_files_in_its_settings(
    evalstream: Run, tmp_path: Path
) -> None:
    settings = tmp_path / "nightly.yaml"
    settings.write_text(f"files: [{SIGNALS}]\nout_dir: {tmp_path / 'reports'}\n")
    proc = evalstream("nightly", "--config", str(settings))
    assert proc.returncode == 2, proc.stderr
    assert f"{SIGNALS} looks like signal JSONL" in proc.stderr
    assert f"are read by {CHECK}" in proc.stderr
    assert not (tmp_path / "reports").exists()


def test_standard_input_is_recognised_from_its_first_line(
    evalstream: Run, files: dict[str, Path]
) -> None:
    proc = evalstream("check", "--suite", str(SUITE), "-", stdin=files["store"].read_text())
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: standard input looks like an episode-store export")
    assert "run `evalstream score FILE`" in proc.stderr


def test_a_pipe_is_recognised_from_its_first_line_and_never_read_twice(
    evalstream: Run, files: dict[str, Path], tmp_path: Path
) -> None:
    def through_fifo(text: str, *args: str) -> subprocess.CompletedProcess[str]:
        fifo = tmp_path / f"fifo-{len(list(tmp_path.iterdir()))}"
        os.mkfifo(fifo)
        writer = threading.Thread(target=fifo.write_text, args=(text,))
        writer.start()
        try:
            return evalstream("check", "--suite", str(SUITE), str(fifo), *args)
        finally:
            writer.join(timeout=60)

    wrong = through_fifo(files["store"].read_text())
    assert wrong.returncode == 2
    assert "looks like an episode-store export" in wrong.stderr
    # a bad first line of signals: the rest of the pipe is still evaluated
    signals = '{"name": "tool:call"}\n' + SIGNALS.read_text()
    report = json.loads(through_fifo(signals, "--format", "json").stdout)
    assert len(report["rejected"]) == 1
    assert report["summary"]["episodes"] == len(
        {json.loads(line)["episode_id"] for line in SIGNALS.read_text().splitlines()}
    )


def test_json_of_unknown_shape_keeps_the_commands_own_error(
    evalstream: Run, files: dict[str, Path]
) -> None:
    unknown = str(files["unknown"])
    check = evalstream("check", "--suite", str(SUITE), unknown)
    assert check.returncode == 2
    assert "looks like" not in check.stderr
    assert "signal has no `name`" in check.stdout
    score = evalstream("score", unknown, "--no-baseline")
    assert score.returncode == 2
    assert "looks like" not in score.stderr
    assert "has no `episode_id`" in score.stderr


def test_a_signal_file_with_one_bad_first_line_is_still_checked(
    evalstream: Run, tmp_path: Path
) -> None:
    signals = tmp_path / "signals.jsonl"
    signals.write_text('{"name": "tool:call"}\n' + SIGNALS.read_text())
    proc = evalstream("check", "--suite", str(SUITE), str(signals), "--format", "json")
    assert proc.returncode == 2  # the rejected line, as before
    assert "looks like" not in proc.stderr
    report = json.loads(proc.stdout)
    assert len(report["rejected"]) == 1
    assert report["summary"]["episodes"] > 0


def test_the_right_files_still_work(evalstream: Run, files: dict[str, Path]) -> None:
    checked = evalstream("check", "--suite", str(SUITE), str(SIGNALS), "--format", "json")
    assert checked.returncode in (0, 1), checked.stderr
    assert json.loads(checked.stdout)["summary"]["episodes"] > 0
    replayed = evalstream("replay", "--suite", str(SUITE), str(files["recording"]))
    assert replayed.returncode in (0, 1), replayed.stderr
    scored = evalstream("score", str(files["store-json"]), "--no-baseline")
    assert scored.returncode == 0, scored.stderr
    assert "3/3 episodes passed" in scored.stdout
    reported = evalstream("report", str(files["score-run"]))
    assert reported.returncode == 0, reported.stderr
    compared = evalstream("compare", str(files["dataset-run"]), str(files["dataset-run"]))
    assert compared.returncode == 0, compared.stderr
    for proc in (checked, replayed, scored, reported, compared):
        assert "looks like" not in proc.stderr
