"""Episode-store episodes from files: what `GET /v1/episodes/export` writes, or saved answers.

Accepted per file: NDJSON (one episode object per line; blank lines skipped), or one JSON
document that is an episode, a list of episodes, or an object with an `episodes` list. Each
item comes with where it was (`file:line` for NDJSON, `file[#index]` otherwise), so an
error names the exact place. A line that is not JSON yields an `EpisodeFileError` item in
its place instead of stopping the whole file.

A JSON array is read element by element, never held whole: the standard library's scanner
finds where each element ends and orjson parses it, as every other file (an invalid array is
one error naming the element: a file that starts with `[` is a JSON array, not NDJSON); NDJSON of
STREAM_MIN_BYTES or more is read line by line. Other documents, and smaller NDJSON, are read
at once. (Element by element costs about 0.06 s more CPU than one orjson parse of a 20,000
episode array, 0.40 against 0.34 s, and holds one element instead of the whole file.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson

from evalstream.assertions.errors import InputError

JSON = Any
# NDJSON at least this big is read line by line instead of at once.
STREAM_MIN_BYTES = 256_000_000
STREAM_CHUNK = 4_000_000
MAX_ELEMENT_CHARS = 64_000_000  # an array element not decoded by then is not valid JSON
_WHITESPACE = " \t\n\r"
_NUMBER_TAIL = re.compile(r"[0-9eE+\-.]*")


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


def _line_items(p: Path, lines: Iterable[bytes]) -> Iterator[FileItem | FileProblem]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{p}:{number}"
        try:
            yield FileItem(where, orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            yield FileProblem(where, EpisodeFileError(f"{where}: not valid JSON: {exc}"))


def _file_lines(p: Path) -> Iterator[bytes]:
    """The file's lines as `bytes.splitlines` splits them (at \\n, \\r\\n and \\r), read
    as they come."""
    with p.open("rb") as chunks:
        for chunk in chunks:
            yield from chunk.splitlines()


def _starts_an_array(p: Path) -> bool:
    with p.open("rb") as raw:
        head = raw.read(4096).lstrip()
    return head.startswith(b"[")


class _ArrayReader:
    """A JSON array's text in chunks, with the position of the next unread character."""

    def __init__(self, p: Path, text: TextIO) -> None:
        self.p, self.text = p, text
        self.buf, self.at, self.eof = "", 0, False

    def more(self) -> bool:
        """Append the next chunk (dropping what was read); False at the end of the file."""
        chunk = "" if self.eof else self.text.read(STREAM_CHUNK)
        self.eof = not chunk
        self.buf, self.at = self.buf[self.at :] + chunk, 0
        return not self.eof

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the file)."""
        while True:
            buf, at = self.buf, self.at
            while at < len(buf) and buf[at] in _WHITESPACE:
                at += 1
            self.at = at
            if at < len(buf):
                return buf[at]
            if not self.more():
                return ""

    def expect(self, char: str, after: str) -> None:
        if self.peek() != char:
            raise EpisodeFileError(f"{self.p}: not valid JSON: `{char}` expected {after}")
        self.at += 1


def _streamed_array_items(p: Path) -> Iterator[FileItem]:
    """A JSON array's episodes one at a time, read in chunks, so that a file of any size is
    never held whole (the standard library's C scanner finds each element's end)."""
    try:
        yield from _array_elements(p)
    except UnicodeDecodeError as exc:
        raise EpisodeFileError(
            f"{p}: not valid JSON: the file is not UTF-8 text ({exc.reason}); save it as UTF-8"
        ) from exc


def _array_elements(p: Path) -> Iterator[FileItem]:
    scanner = json.JSONDecoder()
    with p.open("r", encoding="utf-8") as text:
        reader = _ArrayReader(p, text)
        reader.expect("[", "at the start")
        index = 0
        closed = reader.peek() == "]"
        if closed:
            reader.at += 1
        while not closed:
            reader.peek()
            start = reader.at
            try:  # the scanner finds where the element ends ...
                _, end = scanner.raw_decode(reader.buf, start)
            except json.JSONDecodeError as exc:
                if _cut_by_the_chunk(exc, reader) and reader.more():
                    continue
                raise EpisodeFileError(f"{p}: not valid JSON in [#{index}]: {exc.msg}") from exc
            if _NUMBER_TAIL.fullmatch(reader.buf, end) and reader.more():
                continue  # the chunk ends in (or right after) a number that may go on
            try:  # ... and orjson reads it, as it reads every other episode file
                item = orjson.loads(reader.buf[start:end])
            except orjson.JSONDecodeError as exc:
                raise EpisodeFileError(f"{p}: not valid JSON in [#{index}]: {exc}") from exc
            yield FileItem(f"{p}[#{index}]", item)
            index += 1
            reader.at = end
            if reader.peek() == ",":
                reader.at += 1
            else:
                reader.expect("]", f"after [#{index - 1}]")
                closed = True
        if reader.peek():
            raise EpisodeFileError(f"{p}: not valid JSON: text after the closing `]`")


def _cut_by_the_chunk(exc: json.JSONDecodeError, reader: _ArrayReader) -> bool:
    """Whether the element failed only because the chunk ends inside it (a string, a word
    such as `true`, an escape): then the next chunk is read; otherwise the error is real,
    and the rest of the file is not read in to find that out."""
    if len(reader.buf) - reader.at > MAX_ELEMENT_CHARS:
        return False
    return exc.msg.startswith("Unterminated string") or exc.pos >= len(reader.buf) - 16


def read_episode_file(path: str | Path) -> Iterator[FileItem | FileProblem]:
    p = Path(path)
    try:
        if _starts_an_array(p):
            yield from _streamed_array_items(p)
            return
        if p.stat().st_size >= STREAM_MIN_BYTES and _first_line_is_a_record(p):
            yield from _line_items(p, _file_lines(p))
            return
        data = p.read_bytes()
    except OSError as exc:
        raise EpisodeFileError(f"{p}: cannot read the episode file: {exc.strerror}") from exc
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        yield from _line_items(p, data.splitlines())  # not one JSON document: NDJSON
        return
    del data
    yield from _document_items(p, doc)


def read_episode_files(paths: list[str]) -> Iterator[FileItem | FileProblem]:
    for path in paths:
        yield from read_episode_file(path)
