"""Episode-store episodes from files: what `GET /v1/episodes/export` writes, or saved answers.

Accepted per file: NDJSON (one episode object per line; blank lines skipped), or one JSON
document that is an episode, a list of episodes, or an object with an `episodes` list. Each
item comes with where it was (`file:line` for NDJSON, `file[#index]` otherwise), so an
error names the exact place. A line that is not JSON yields an `EpisodeFileError` item in
its place instead of stopping the whole file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from evalstream.assertions.errors import InputError

JSON = Any


class EpisodeFileError(InputError):
    """An episode file that cannot be read or parsed (the message names file and line)."""


@dataclass(frozen=True, slots=True)
class FileItem:
    where: str
    episode: JSON  # a decoded episode object (validated later by the codec)


@dataclass(frozen=True, slots=True)
class FileProblem:
    where: str
    error: EpisodeFileError


def _document_items(path: Path, doc: JSON) -> Iterator[FileItem]:
    if isinstance(doc, dict) and isinstance(doc.get("episodes"), list):
        doc = doc["episodes"]
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield FileItem(f"{path}[#{i}]", item)
    else:
        yield FileItem(str(path), doc)


def read_episode_file(path: str | Path) -> Iterator[FileItem | FileProblem]:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise EpisodeFileError(f"{p}: cannot read the episode file: {exc.strerror}") from exc
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass  # not one JSON document: NDJSON
    else:
        yield from _document_items(p, doc)
        return
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{p}:{number}"
        try:
            yield FileItem(where, orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            yield FileProblem(where, EpisodeFileError(f"{where}: not valid JSON: {exc}"))


def read_episode_files(paths: list[str]) -> Iterator[FileItem | FileProblem]:
    for path in paths:
        yield from read_episode_file(path)
