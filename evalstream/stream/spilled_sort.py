"""Items put in order in bounded memory: an external merge sort over scratch files.

`SpilledSort` holds up to `run_size` items; when one more comes, it sorts them and writes
them to a scratch file as one sorted run (each item with `write`), and `in_order()` merges
the runs (and what still waits) back, reading each run front to back with `read`. Memory
holds one run's worth of items and one buffered item per run, whatever the input's size;
an input of at most `run_size` items is sorted in memory, never written. Without a
directory every item waits in memory (a plain sort).
"""

from __future__ import annotations

import contextlib
import heapq
import marshal
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any, Generic, TypeVar

from evalstream.stream.scored_records import ScratchError

T = TypeVar("T")
BUFFER = 1 << 20  # bytes of read and write buffer per run file


def marshal_frames(path: str) -> Iterator[Any]:
    """The values written one after another with `marshal.dump` to `path`."""
    with open(path, "rb", buffering=BUFFER) as run:
        while True:
            try:
                yield marshal.load(run)
            except EOFError:
                return


class SpilledSort(Generic[T]):
    """Items in, the same sorted by `key` out (see the module docstring). A sort is read
    once: `in_order()` removes the run files it has read."""

    def __init__(
        self,
        directory: str | None,
        run_size: int,
        *,
        key: Callable[[T], Any],
        write: Callable[[T, IO[bytes]], None],
        read: Callable[[str], Iterator[T]],
        prefix: str,
    ) -> None:
        self.directory = directory
        self.run_size = run_size
        self.key, self.write, self.read, self.prefix = key, write, read, prefix
        self.waiting: list[T] = []
        self.runs: list[str] = []

    def add(self, item: T) -> None:
        # A full run is spilled when one more item comes, not before: the last run (the
        # whole input, when it fits) is merged from memory, never written.
        if self.directory is not None and len(self.waiting) >= self.run_size:
            self._spill()
        self.waiting.append(item)

    def _spill(self) -> None:
        directory = self.directory
        assert directory is not None
        self.waiting.sort(key=self.key)
        try:
            fd, path = tempfile.mkstemp(dir=directory, prefix=self.prefix, suffix=".run")
            self.runs.append(path)
            with os.fdopen(fd, "wb", buffering=BUFFER) as run:
                for item in self.waiting:
                    self.write(item, run)
        except OSError as exc:
            raise ScratchError.of(directory, exc) from exc
        self.waiting = []

    def in_order(self) -> Iterator[T]:
        """Every item added, sorted (each freed once the caller moves on to the next)."""
        waiting, self.waiting = self.waiting, []
        waiting.sort(key=self.key)
        if not self.runs:
            waiting.reverse()
            while waiting:
                yield waiting.pop()
            return
        sources = [self.read(path) for path in self.runs]
        sources.append(iter(waiting))
        yield from heapq.merge(*sources, key=self.key)
        self.discard()

    def discard(self) -> None:
        for path in self.runs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self.runs = []
