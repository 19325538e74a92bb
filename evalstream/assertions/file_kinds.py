"""What kind of evalstream file some bytes are, told from the shape of the first record.

evalstream's commands read different files: signal JSONL (`check`, `up`), topic recordings
(`replay`), episode-store exports (`score`, `nightly`), suites and datasets (`check --suite`,
`eval`), saved runs (`compare`, `report`, `eval-report`), score runs (`report`), review queues
(`review`), eval-harness suites (`harness run`) and the skill-eval files of the Python API.
A file given to the wrong command fails on every record with the same field error; the commands call
`other_kind_message` on that error path only (never on the happy path), so the user reads one
line naming the kind the file looks like, the evidence, and the command that reads it.

The sniffing is cheap and conservative: one JSON document, else the first JSON line, else
the first YAML document; then the keys of the first record. A shape it does not recognise is
`None`, and the command keeps its own error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson
import yaml

JSON = Any
RECORDING_HEADER = "evalstream_recording"
EVAL_RUN_KINDS = {
    "evalstream.dataset-run": "a saved dataset run",
    "evalstream.matrix-run": "a saved matrix run",
    "evalstream.comparison": "a saved comparison",
}
SCORE_RUN_KIND = "score-run"


class FileKind(StrEnum):
    SIGNALS = "signals"
    RECORDING = "recording"
    STORE_EPISODES = "store-episodes"
    SUITE = "suite"
    EVAL_RUN = "eval-run"
    SCORE_RUN = "score-run"
    REVIEW_QUEUE = "review-queue"
    EVAL_HARNESS = "eval-harness"
    SKILL_EVAL = "skill-eval"


@dataclass(frozen=True, slots=True)
class KindInfo:
    plural: str  # what the files are called, as the subject of "are read by"
    reader: str  # who reads them
    fixes: tuple[str, ...]  # what to run instead; `{path}` is the file, `{model}` its class
    python: bool = False  # read by the Python API, not by a command


KINDS: dict[FileKind, KindInfo] = {
    FileKind.SIGNALS: KindInfo(
        "signal JSONL files",
        "`evalstream check` (and `up`)",
        ("evalstream check --suite SUITE.yaml {path}",),
    ),
    FileKind.RECORDING: KindInfo(
        "topic recordings", "`evalstream replay`", ("evalstream replay --suite SUITE.yaml {path}",)
    ),
    FileKind.STORE_EPISODES: KindInfo(
        "episode-store exports", "`evalstream score` (and `nightly`)", ("evalstream score {path}",)
    ),
    FileKind.SUITE: KindInfo(
        "suites and datasets",
        "`evalstream check --suite` and `evalstream eval`",
        (
            "evalstream check --suite {path} SIGNALS.jsonl",
            "evalstream eval {path} --target TARGET",
        ),
    ),
    FileKind.EVAL_RUN: KindInfo(
        "saved dataset runs, matrix runs and comparisons",
        "`evalstream compare`, `eval --baseline`, `report` and `eval-report`",
        ("evalstream report {path}", "evalstream compare BASELINE.json {path}"),
    ),
    FileKind.SCORE_RUN: KindInfo(
        "score runs", "`evalstream report`", ("evalstream report {path}",)
    ),
    FileKind.REVIEW_QUEUE: KindInfo(
        "review queues", "`evalstream review`", ("evalstream review status {path}",)
    ),
    FileKind.EVAL_HARNESS: KindInfo(
        "eval-harness suites and eval files",
        "`evalstream harness run`",
        ("evalstream harness run --suite {path} --outputs OUTPUTS.json",),
    ),
    FileKind.SKILL_EVAL: KindInfo(
        "skill-eval files",
        "the Python API (no command reads them)",
        ("evalstream.assertions.skill_evals.models.load({model}, '{path}')",),
        python=True,
    ),
}

# Each skill-eval file by two keys only it has; (file name, model class, keys).
SKILL_EVAL_FILES = (
    ("evals.json", "EvalsFile", ("skill", "cases")),
    ("grading.json", "GradingFile", ("case_id", "overall_score")),
    ("history.json", "HistoryFile", ("versions", "current_version")),
    ("comparison.json", "ComparisonFile", ("eval_prompt", "winner")),
    ("analysis.json", "AnalysisFile", ("winner_version", "loser_version")),
)
SUITE_KEYS = ("cases", "defaultAssertions", "default_assertions", "match")


@dataclass(frozen=True, slots=True)
class Sniffed:
    kind: FileKind
    label: str  # "an episode-store export"
    evidence: str  # "its first line has `episode_id` and a `steps` list"
    model: str = ""  # the skill-eval model class that reads it


def other_kind_message(
    path: str, data: bytes, expected: FileKind | tuple[FileKind, ...]
) -> str | None:
    """The one-line error for a file that looks like another kind than `expected` (what the
    command reads), or None when it looks like `expected` or like nothing known (the caller
    keeps its own error). `path` "-" is standard input."""
    wanted = expected if isinstance(expected, tuple) else (expected,)
    sniffed = sniff(data)
    if sniffed is None or sniffed.kind in wanted:
        return None
    info = KINDS[sniffed.kind]
    name, shown = ("standard input", "FILE") if path == "-" else (path, path)
    fixes = " or ".join(f"`{fix.format(path=shown, model=sniffed.model)}`" for fix in info.fixes)
    reads = " or ".join(KINDS[k].plural for k in wanted)
    action = "load it in Python with" if info.python else "run"
    return (
        f"{name} looks like {sniffed.label} ({sniffed.evidence}); {info.plural} are read by "
        f"{info.reader}, while this command reads {reads}: {action} {fixes}"
    )


def sniff(data: bytes) -> Sniffed | None:
    """The kind of file `data` (its whole text, or its head) looks like, or None."""
    parsed = _first_document(data)
    if parsed is None:
        return None
    doc, where = parsed
    if isinstance(doc, Mapping):
        found = classify(doc, where)
        if found is not None or not isinstance(doc.get("episodes"), list):
            return found
        doc, where = doc["episodes"], "the first item of its `episodes`"  # {"episodes": [...]}
    elif isinstance(doc, list):
        where = "its first item"
    first = doc[0] if isinstance(doc, list) and doc else None
    return classify(first, where) if isinstance(first, Mapping) else None


def classify(record: Mapping[str, JSON], where: str = "it") -> Sniffed | None:
    """The kind a record (a file's first record or top level) belongs to, or None."""

    def has(*keys: str) -> bool:
        return all(k in record for k in keys)

    def keys(*names: str) -> str:
        quoted = [f"`{n}`" for n in names]
        listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
        return f"{where} has {listed}"

    kind = record.get("kind") if isinstance(record.get("kind"), str) else None
    if has(RECORDING_HEADER):
        return Sniffed(FileKind.RECORDING, "a topic recording", keys(RECORDING_HEADER))
    if has("topic", "partition", "offset"):
        return Sniffed(
            FileKind.RECORDING, "a topic recording", keys("topic", "partition", "offset")
        )
    if kind in EVAL_RUN_KINDS:
        return Sniffed(FileKind.EVAL_RUN, EVAL_RUN_KINDS[kind], f"{where} has `kind: {kind}`")
    if kind == SCORE_RUN_KIND:
        return Sniffed(FileKind.SCORE_RUN, "a score run", f"{where} has `kind: {kind}`")
    if has("eval_suite"):
        return Sniffed(FileKind.EVAL_HARNESS, "an eval-harness suite", keys("eval_suite"))
    if has("eval_type") and (has("test_cases") or has("schema_version")):
        second = "test_cases" if has("test_cases") else "schema_version"
        return Sniffed(
            FileKind.EVAL_HARNESS, "an eval-harness eval file", keys("eval_type", second)
        )
    for key in ("capability_eval", "regression_eval"):
        if has(key):
            return Sniffed(FileKind.EVAL_HARNESS, "an eval-harness eval file", keys(key))
    if has("id", "grader") or has("id", "baseline", "comparison"):
        found = ("id", "grader") if has("grader") else ("id", "baseline", "comparison")
        return Sniffed(FileKind.EVAL_HARNESS, "an eval-harness eval file", keys(*found))
    for name, model, pair in SKILL_EVAL_FILES:
        if has(*pair):
            return Sniffed(FileKind.SKILL_EVAL, f"a skill-eval {name}", keys(*pair), model)
    if isinstance(record.get("items"), list) and has("ratings"):
        return Sniffed(FileKind.REVIEW_QUEUE, "a review queue", keys("items", "ratings"))
    if isinstance(record.get("steps"), list) and has("episode_id"):
        return Sniffed(
            FileKind.STORE_EPISODES,
            "an episode-store export",
            f"{where} has `episode_id` and a `steps` list",
        )
    if isinstance(record.get("name"), str) and has("timestamp"):
        third = next((k for k in ("episode_id", "payload", "seq") if k in record), None)
        if third is not None:
            return Sniffed(FileKind.SIGNALS, "signal JSONL", keys("name", "timestamp", third))
    if isinstance(record.get("name"), str):
        suite_key = next((k for k in SUITE_KEYS if k in record), None)
        if suite_key is not None:
            return Sniffed(FileKind.SUITE, "an evalstream suite", keys("name", suite_key))
    return None


def _first_document(data: bytes) -> tuple[JSON, str] | None:
    """One JSON document, else the first JSON line, else the first YAML document; with
    where in the file the value was found."""
    text = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return orjson.loads(text), "its top level"
    except orjson.JSONDecodeError:
        pass
    first = next((line for line in text.splitlines() if line.strip()), b"")
    if not first:
        return None
    try:
        return orjson.loads(first), "its first line"
    except orjson.JSONDecodeError:
        pass
    if first.lstrip()[:1] in (b"{", b"["):
        return None  # JSON cut short or broken: not a YAML document either
    try:
        docs = yaml.load_all(text.decode("utf-8", "replace"), Loader=_LOADER)
        return next(iter(docs), None), "its top level"
    except yaml.YAMLError:
        return None


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
