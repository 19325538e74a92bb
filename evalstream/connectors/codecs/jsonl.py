"""Reading signals from JSONL files (or stdin), with line numbers; bad lines are data.

Each line is decoded on its own; a line that is not a valid signal yields a `Rejected` record
with file, line number, reason and the original bytes, and reading goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from evalstream.assertions.errors import InputError, SignalDecodeError
from evalstream.assertions.wire.signals import Signal, decode_signal

MAX_LINE_BYTES = 1_048_576  # a longer line is rejected as oversized, not decoded


@dataclass(frozen=True, slots=True)
class Rejected:
    source: str
    line: int
    reason: str
    message: str
    raw: bytes

    def describe(self) -> str:
        return f"{self.source}:{self.line}: {self.message}"


def read_signals(path: str, *, episode_id: str | None = None) -> Iterator[Signal | Rejected]:
    """Signals and rejects from one JSONL file, in file order. `-` reads standard input."""
    if path == "-":
        yield from _decode_stream(sys.stdin.buffer, "<stdin>", episode_id)
        return
    file = Path(path)
    try:
        stream = file.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with stream:
        yield from _decode_stream(stream, path, episode_id)


def _decode_stream(
    stream: BinaryIO, source: str, episode_id: str | None
) -> Iterator[Signal | Rejected]:
    for number, raw in enumerate(stream, start=1):
        line = raw.strip()
        if not line:
            continue
        if len(line) > MAX_LINE_BYTES:
            yield Rejected(
                source,
                number,
                "oversized",
                f"line of {len(line)} bytes exceeds {MAX_LINE_BYTES}",
                line[:1024],
            )
            continue
        try:
            yield decode_signal(line, episode_id=episode_id)
        except SignalDecodeError as exc:
            yield Rejected(source, number, exc.reason, exc.message, line)
