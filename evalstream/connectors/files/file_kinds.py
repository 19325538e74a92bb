"""Reading enough of a file to tell its kind (`evalstream.assertions.file_kinds`), on an error path.

Commands call `raise_if_other_kind` (or wrap the read in `expecting`) only after a file failed
to parse as the kind they read:
when the file looks like another known kind, a `WrongFileKindError` names that kind and the
command that reads it; otherwise the command raises its own error as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import zstandard

from evalstream.assertions.errors import InputError, WrongFileKindError
from evalstream.assertions.file_kinds import FileKind, other_kind_message
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.codecs.jsonl import Rejected

# A whole JSON document up to this size is parsed; beyond it, only the head is looked at
# (enough for the first line of JSONL, not for a large single JSON document).
SNIFF_BYTES = 16 * 1024 * 1024


def read_head(path: str | Path) -> bytes:
    """Up to SNIFF_BYTES of the file, decompressed when it is zstd (`.zst`); b"" when it
    cannot be read, or is no regular file (a pipe read again would lose what the command has
    not read yet): the command's own error then stands."""
    p = Path(path)
    if not p.is_file():
        return b""
    try:
        with p.open("rb") as handle:
            if p.suffix == ".zst":
                reader = zstandard.ZstdDecompressor().stream_reader(handle)
                return bytes(reader.read(SNIFF_BYTES))
            return handle.read(SNIFF_BYTES)
    except (OSError, zstandard.ZstdError):
        return b""


def raise_if_other_kind(
    path: str | Path, expected: FileKind | tuple[FileKind, ...], head: bytes | None = None
) -> None:
    """Raise WrongFileKindError when the file (or the given `head` of it, e.g. a line of
    stdin) looks like a known kind other than `expected`."""
    data = read_head(path) if head is None else head
    message = other_kind_message(str(path), data, expected)
    if message is not None:
        raise WrongFileKindError(message)


def refuse_other_kind_of_signals(path: str, first: Signal | Rejected | None) -> None:
    """Given the first line read from the signals file `path` (`-` for stdin): when it was
    rejected and the file looks like another kind (a store export, a suite...), raise a
    WrongFileKindError naming the command that reads it, not one rejection per line. A pipe
    is judged by that line alone: it is not read twice."""
    if isinstance(first, Rejected):
        regular = path != "-" and Path(path).is_file()
        raise_if_other_kind(path, FileKind.SIGNALS, None if regular else first.raw)


@contextmanager
def expecting(path: str | Path, kind: FileKind | tuple[FileKind, ...]) -> Iterator[None]:
    """Around reading `path` as `kind`: an InputError from the read becomes a
    WrongFileKindError when the file looks like another kind, else propagates unchanged."""
    try:
        yield
    except WrongFileKindError:
        raise
    except InputError:
        raise_if_other_kind(path, kind)
        raise
