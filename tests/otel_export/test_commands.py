"""`check` and `replay` export every verdict of every episode; bad OTLP settings are refused
before anything runs, with the fix."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from evalstream.connectors.files.recording import RecordedMessage, RecordingWriter
from evalstream.connectors.otel_export.evaluation_events import derived_span
from tests.otel_export.receiver import Received, otlp_receiver

EXE = Path(sys.executable).parent / "evalstream"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-review"


def evalstream(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args], capture_output=True, text=True, timeout=120, check=False
    )


def report_assertions(path: Path) -> dict[str, int]:
    report = orjson.loads(path.read_bytes())
    return {e["episode_id"]: len(e["assertions"]) for e in report["episodes"]}


def first_signals() -> dict[str, str]:
    first: dict[str, str] = {}
    for line in EXAMPLE.joinpath("episodes.jsonl").read_bytes().splitlines():
        sig = orjson.loads(line)
        first.setdefault(sig["episode_id"], sig["id"])
    return first


def by_episode(items: list[Received]) -> dict[str, list[Received]]:
    out: dict[str, list[Received]] = defaultdict(list)
    for item in items:
        out[str(item.attributes["evalstream.episode_id"])].append(item)
    return out


def test_check_exports_every_verdict_of_every_episode(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    with otlp_receiver() as receiver:
        done = evalstream(
            "check",
            "--suite",
            str(EXAMPLE / "suite.yaml"),
            str(EXAMPLE / "episodes.jsonl"),
            "-f",
            "json",
            "-o",
            str(report),
            "--otlp-endpoint",
            receiver.url,
        )
    assert done.returncode in (0, 1), done.stderr
    assert "OTLP export" not in done.stderr  # nothing dropped or failed
    expected = report_assertions(report)
    events = by_episode(receiver.items)
    assert {k: len(v) for k, v in events.items()} == {k: n for k, n in expected.items() if n}
    first = first_signals()
    for episode_id, items in events.items():
        # No OTLP ids in these signals: one derived trace per episode, the same every run.
        ref = derived_span(episode_id, first[episode_id])
        assert {(i.trace_id, i.span_id) for i in items} == {(ref.trace_id, ref.span_id)}
        labels = {i.attributes["gen_ai.evaluation.score.label"] for i in items}
        assert labels <= {"pass", "fail", "error"}


def test_replay_into_check_exports_spans_as_check_does(tmp_path: Path) -> None:
    recording = tmp_path / "signals.jsonl"
    with RecordingWriter(recording, {"topic": "evalstream.signals"}) as writer:
        lines = EXAMPLE.joinpath("episodes.jsonl").read_bytes().splitlines()
        for offset, line in enumerate(lines):
            key = orjson.loads(line)["episode_id"].encode()
            writer.write(RecordedMessage("evalstream.signals", 0, offset, offset, key, line))
    report = tmp_path / "report.json"
    with otlp_receiver() as receiver:
        done = evalstream(
            "replay",
            str(recording),
            "--into",
            "check",
            "--suite",
            str(EXAMPLE / "suite.yaml"),
            "-f",
            "json",
            "-o",
            str(report),
            "--otlp-endpoint",
            receiver.url,
            "--otlp-mode",
            "spans",
        )
    assert done.returncode in (0, 1), done.stderr
    expected = {k: n for k, n in report_assertions(report).items() if n}
    events = by_episode(receiver.items)
    assert {k: len(v) for k, v in events.items()} == expected
    assert {i.path for i in receiver.items} == {"/v1/traces"}
    first = first_signals()
    for episode_id, items in events.items():
        ref = derived_span(episode_id, first[episode_id])
        assert {(i.trace_id, i.parent_span_id) for i in items} == {(ref.trace_id, ref.span_id)}


SPANS_ON_LOGS = ["--otlp-endpoint", "http://c/v1/logs", "--otlp-mode", "spans"]
TO_TOPIC = ["--into", "topic", "--topic", "t", "--otlp-endpoint", "http://c"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["check", "--suite", "S", "R", "--otlp-endpoint", "localhost:4318"], "not an http"),
        (["check", "--suite", "S", "R", *SPANS_ON_LOGS], "the logs path"),
        (["worker", "--suite", "S", "--otlp-endpoint", "ftp://c:4318"], "not an http"),
        (["replay", "R", *TO_TOPIC], "--into check or embedded"),
    ],
)
def test_bad_otlp_settings_are_refused_with_the_fix(
    tmp_path: Path, args: list[str], fragment: str
) -> None:
    suite, recording = tmp_path / "suite.yaml", tmp_path / "rec.jsonl"
    suite.write_bytes((EXAMPLE / "suite.yaml").read_bytes())
    recording.write_bytes((EXAMPLE / "episodes.jsonl").read_bytes())
    paths = {"S": str(suite), "R": str(recording)}
    done = evalstream(*[paths.get(a, a) for a in args])
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr


def test_up_with_scoring_exports_the_scores_of_each_closed_episode(tmp_path: Path) -> None:
    scoring = tmp_path / "scoring.yaml"
    scoring.write_text("baselines: {mode: rolling}\n", encoding="utf-8")
    with otlp_receiver() as receiver:
        done = evalstream(
            "up",
            str(EXAMPLE / "episodes.jsonl"),
            "--suite",
            str(EXAMPLE / "suite.yaml"),
            "--scoring",
            str(scoring),
            "--metrics-port",
            "0",
            "--otlp-endpoint",
            receiver.url,
        )
    assert done.returncode in (0, 1), done.stderr
    first = first_signals()
    for episode_id, items in by_episode(receiver.items).items():
        names = [str(i.attributes["gen_ai.evaluation.name"]) for i in items]
        scores = [
            i for i in items if str(i.attributes["gen_ai.evaluation.name"]).startswith("score.")
        ]
        assert "score.overall" in names, names
        assert all(
            0.0 <= float(i.attributes["gen_ai.evaluation.score.value"]) <= 1.0 for i in scores
        )
        assert len(names) == len(set(names))  # each verdict and score once
        ref = derived_span(episode_id, first[episode_id])
        assert {(i.trace_id, i.span_id) for i in items} == {(ref.trace_id, ref.span_id)}
    assert len(by_episode(receiver.items)) == len(first)
