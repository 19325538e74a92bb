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
        for i in range(len(doc)):
            item, doc[i] = doc[i], None  # each episode is freed once its reader is done
            yield FileItem(f"{path}[#{i}]", item)
    else:
        yield FileItem(str(path), doc)


def _first_line_is_a_record(p: Path) -> bool:
    """Whether the file is NDJSON by its first lines: the first non-blank line is JSON and
    another non-blank line follows (then the whole file cannot be one JSON document), so
    it is read line by line without holding it whole."""
    with p.open("rb") as lines:
        for line in lines:
            if line.strip():
                try:
                    orjson.loads(line)
                except orjson.JSONDecodeError:
                    return False
                return any(rest.strip() for rest in lines)
    return False


def _ndjson_items(p: Path) -> Iterator[FileItem | FileProblem]:
    number = 0
    with p.open("rb") as chunks:
        for chunk in chunks:  # split as bytes.splitlines would: at \n, \r\n and \r
            for line in chunk.splitlines():
                number += 1
                if not line.strip():
                    continue
                where = f"{p}:{number}"
                try:
                    yield FileItem(where, orjson.loads(line))
                except orjson.JSONDecodeError as exc:
                    yield FileProblem(where, EpisodeFileError(f"{where}: not valid JSON: {exc}"))


def read_episode_file(path: str | Path) -> Iterator[FileItem | FileProblem]:
    p = Path(path)
    try:
        if _first_line_is_a_record(p):
            yield from _ndjson_items(p)
            return
        data = p.read_bytes()
    except OSError as exc:
        raise EpisodeFileError(f"{p}: cannot read the episode file: {exc.strerror}") from exc
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        del data
        yield from _ndjson_items(p)  # not one JSON document: NDJSON
        return
    del data
    yield from _document_items(p, doc)


def read_episode_files(paths: list[str]) -> Iterator[FileItem | FileProblem]:
    for path in paths:
        yield from read_episode_file(path)
