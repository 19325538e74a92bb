"""The state file of a judge batch: which batch holds which questions, kept on disk.

A run interrupted while its batch is processing resumes it: the file names the batch id and
maps each question (its cache key) to the batch request's `custom_id`. A run asking the same
questions finds the file, polls that batch and pays nothing twice. The default file is named
by the hash of the questions, under `~/.cache/evalstream/judge-batches/`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

STATE_VERSION = 1


def questions_hash(keys: Iterable[str]) -> str:
    """The identity of a set of questions (order and repeats do not matter)."""
    return hashlib.sha256("\n".join(sorted(set(keys))).encode()).hexdigest()


def default_state_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "evalstream" / "judge-batches"


def state_path(keys: Iterable[str], explicit: str | None) -> Path:
    """`explicit` when given, else the default directory's file for these questions."""
    if explicit:
        return Path(explicit)
    return default_state_dir() / f"{questions_hash(keys)[:32]}.json"


@dataclass(frozen=True)
class BatchState:
    """A submitted batch: its id, the questions' hash and question key -> custom_id."""

    batch_id: str
    questions: str
    custom_ids: Mapping[str, str]

    def to_json(self) -> dict[str, object]:
        return {
            "version": STATE_VERSION,
            "batch_id": self.batch_id,
            "questions": self.questions,
            "custom_ids": dict(self.custom_ids),
        }


def load_state(path: Path, questions: str) -> BatchState | None:
    """The state for these questions, or None (no file, another set of questions, damaged)."""
    try:
        data = json.loads(path.read_text("utf-8"))
        state = BatchState(
            batch_id=str(data["batch_id"]),
            questions=str(data["questions"]),
            custom_ids={str(k): str(v) for k, v in data["custom_ids"].items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return state if state.questions == questions and state.batch_id else None


def save_state(path: Path, state: BatchState) -> None:
    """Written atomically: a kill mid-write leaves the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(state.to_json(), sort_keys=True), "utf-8")
    os.replace(temporary, path)


def remove_state(path: Path) -> None:
    path.unlink(missing_ok=True)
