"""Scored episodes' rendered records spilled to disk as they are scored, read back in run order.

A streamed scoring run (`score_sweep`) keeps no episode once scored: each record goes to a
spill file in the run's scratch directory, tagged with the episode's place (start, id). A run
split across processes leaves one file per share, each in its own scoring order;
`MergedRecords` reads them back merged into one process's order, while the results file is
written. The files are private to the run (its scratch directory), written and read by the
same program.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import struct
import tempfile
from collections.abc import Iterator
from operator import itemgetter
from typing import IO

from evalstream.assertions.errors import InputError
from evalstream.assertions.scores.run import Place

_BUFFER = 1 << 20
# A frame: the episode's start, the lengths of its id (UTF-8) and of its record, then both.
_HEADER = struct.Struct("<dII")


class ScratchError(InputError):
    """The run's scratch directory cannot be written (a full disk, a directory removed)."""

    @classmethod
    def of(cls, directory: str, exc: OSError) -> ScratchError:
        return cls(
            f"cannot write the run's scratch files in {directory}: {exc.strerror or exc}; "
            "free space there, or write the results file (--output) to another disk"
        )


class RecordSpill:
    """Appends (place, record) frames to a new file in `directory`."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        try:
            fd, self.path = tempfile.mkstemp(dir=directory, prefix="records-", suffix=".spill")
        except OSError as exc:
            raise ScratchError.of(directory, exc) from exc
        self._file: IO[bytes] | None = os.fdopen(fd, "wb", buffering=_BUFFER)

    def write(self, place: Place, record: bytes) -> None:
        assert self._file is not None, "written after close"
        start, episode_id = place
        key = episode_id.encode()
        try:
            self._file.write(_HEADER.pack(start, len(key), len(record)) + key)
            self._file.write(record)
        except OSError as exc:
            raise ScratchError.of(self.directory, exc) from exc

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                raise ScratchError.of(self.directory, exc) from exc
            finally:
                self._file = None

    def discard(self) -> None:
        with contextlib.suppress(OSError):  # the run is being abandoned: nothing more to say
            self.close()
            os.unlink(self.path)


def read_spill(path: str) -> Iterator[tuple[Place, bytes]]:
    size = _HEADER.size
    with open(path, "rb", buffering=_BUFFER) as spill:
        read = spill.read
        while header := read(size):
            start, key_len, record_len = _HEADER.unpack(header)
            episode_id = read(key_len).decode()
            yield (start, episode_id), read(record_len)


class MergedRecords:
    """The records of one or more spill files in place order (each file is in place order
    already, and places are unique across them)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __iter__(self) -> Iterator[bytes]:
        frames = [read_spill(path) for path in self.paths]
        merged = frames[0] if len(frames) == 1 else heapq.merge(*frames, key=itemgetter(0))
        for _, record in merged:
            yield record
