"""Telling a file's kind from its first record (`evalstream.assertions.file_kinds`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalstream.assertions.file_kinds import FileKind, other_kind_message, sniff
from tests.scoring.episodes import make_episode

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("path", "kind", "label"),
    [
        ("code-review/episodes.jsonl", FileKind.SIGNALS, "signal JSONL"),
        ("code-review/suite.yaml", FileKind.SUITE, "an evalstream suite"),
        ("agent/dataset.yaml", FileKind.SUITE, "an evalstream suite"),
        ("eval-harness/eval-suite.yaml", FileKind.EVAL_HARNESS, "an eval-harness suite"),
        ("eval-harness/capability/string-processing.yaml", FileKind.EVAL_HARNESS, "eval file"),
        ("eval-harness/capability/code-and-extraction.yaml", FileKind.EVAL_HARNESS, "eval file"),
        ("eval-harness/capability/review-comments.yaml", FileKind.EVAL_HARNESS, "eval file"),
        ("eval-harness/regression/users-endpoint.json", FileKind.EVAL_HARNESS, "eval file"),
        ("eval-harness/regression/quality.yaml", FileKind.EVAL_HARNESS, "eval file"),
        ("eval-harness/reviews.json", FileKind.REVIEW_QUEUE, "a review queue"),
        ("skill-evals/evals.json", FileKind.SKILL_EVAL, "evals.json"),
        ("skill-evals/grading.json", FileKind.SKILL_EVAL, "grading.json"),
        ("skill-evals/history.json", FileKind.SKILL_EVAL, "history.json"),
        ("skill-evals/comparison.json", FileKind.SKILL_EVAL, "comparison.json"),
        ("skill-evals/analysis.json", FileKind.SKILL_EVAL, "analysis.json"),
    ],
)
def test_the_example_files_are_recognised(path: str, kind: FileKind, label: str) -> None:
    sniffed = sniff((EXAMPLES / path).read_bytes())
    assert sniffed is not None
    assert sniffed.kind is kind
    assert label in sniffed.label


@pytest.mark.parametrize(
    "data",
    [
        "".join(json.dumps(make_episode(f"e{i}")) + "\n" for i in range(2)),
        json.dumps([make_episode("e1")], indent=2),
        json.dumps({"episodes": [make_episode("e1")]}),
        json.dumps(make_episode("e1")),
    ],
    ids=["ndjson", "list", "episodes-object", "one-episode"],
)
def test_every_store_export_layout_is_an_export(data: str) -> None:
    sniffed = sniff(data.encode())
    assert sniffed is not None
    assert sniffed.kind is FileKind.STORE_EPISODES


def test_saved_runs_are_told_by_their_kind() -> None:
    score_run = {"kind": "score-run", "episodes": [make_episode("e1")]}
    sniffed = sniff(json.dumps(score_run).encode())
    assert sniffed is not None
    assert sniffed.kind is FileKind.SCORE_RUN  # not the episodes it lists
    for kind, label in [
        ("evalstream.dataset-run", "a saved dataset run"),
        ("evalstream.matrix-run", "a saved matrix run"),
        ("evalstream.comparison", "a saved comparison"),
    ]:
        sniffed = sniff(json.dumps({"kind": kind}).encode())
        assert sniffed is not None
        assert (sniffed.kind, sniffed.label) == (FileKind.EVAL_RUN, label)


def test_a_recording_is_told_by_its_header_or_its_messages() -> None:
    header = sniff(b'{"evalstream_recording": 1, "topic": "t"}\n{"topic": "t"}\n')
    message = sniff(b'{"topic": "t", "partition": 0, "offset": 3, "value": {}}\n')
    assert header is not None
    assert message is not None
    assert header.kind is message.kind is FileKind.RECORDING


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n\n",
        b'{"colour": "blue"}\n',
        b"[]",
        b"[1, 2, 3]",
        b'{"kind": ["a list"]}',
        b"just some words\n",
        b"key: [unclosed\n",
        b'[\n  {"episode_id": "cut short", "steps": [',
        b"\x00\xff\xfe binary",
    ],
)
def test_unknown_or_broken_shapes_are_not_guessed(data: bytes) -> None:
    assert sniff(data) is None
    assert other_kind_message("f", data, FileKind.SIGNALS) is None


def test_the_message_names_the_kind_the_evidence_and_the_command() -> None:
    data = json.dumps(make_episode("e1")).encode() + b"\n"
    message = other_kind_message("export.ndjson", data, FileKind.SIGNALS)
    assert message == (
        "export.ndjson looks like an episode-store export (its top level has `episode_id` and "
        "a `steps` list); episode-store exports are read by `evalstream score` (and "
        "`nightly`), while this command reads signal JSONL files: run "
        "`evalstream score export.ndjson`"
    )


def test_a_file_of_the_expected_kind_gives_no_message() -> None:
    data = (EXAMPLES / "code-review" / "episodes.jsonl").read_bytes()
    assert other_kind_message("s.jsonl", data, FileKind.SIGNALS) is None
    assert other_kind_message("s.jsonl", data, (FileKind.SCORE_RUN, FileKind.SIGNALS)) is None
    assert other_kind_message("s.jsonl", data, FileKind.STORE_EPISODES) is not None


def test_standard_input_is_named_as_such_and_the_fix_takes_a_file() -> None:
    data = json.dumps(make_episode("e1")).encode()
    message = other_kind_message("-", data, FileKind.SIGNALS)
    assert message is not None
    assert message.startswith("standard input looks like an episode-store export")
    assert message.endswith("run `evalstream score FILE`")
