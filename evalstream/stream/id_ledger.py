"""Which input items repeat an episode id read earlier, found without a set of every id.

A scoring run keeps the first copy of an episode id (and a run split across processes goes
back to one process when any id repeats). Remembering every id read would grow with the
input; `IdLedger` instead notes (id, input position) pairs, sorts them in runs of `run_size`
written to a scratch file, and once the input is read merges the runs: equal ids then sit
side by side, and every copy after the first (by position) is reported. Memory holds one
run's pairs and the repeats found.
"""

from __future__ import annotations

import contextlib
import heapq
import marshal
import os
import tempfile
from collections.abc import Iterator

from evalstream.stream.scored_records import ScratchError

_BUFFER = 1 << 20


def _read_run(path: str) -> Iterator[tuple[str, int]]:
    with open(path, "rb", buffering=_BUFFER) as run:
        while True:
            try:
                pair: tuple[str, int] = marshal.load(run)
            except EOFError:
                return
            yield pair


class IdLedger:
    """Episode ids with their input positions in; the positions of later copies out."""

    def __init__(self, directory: str | None, run_size: int) -> None:
        self.directory = directory  # None: every pair waits in memory
        self.run_size = run_size
        self.waiting: list[tuple[str, int]] = []
        self.runs: list[str] = []

    def add(self, episode_id: str, position: int) -> None:
        self.waiting.append((episode_id, position))
        if self.directory is not None and len(self.waiting) >= self.run_size:
            self._spill()

    def _spill(self) -> None:
        directory = self.directory
        assert directory is not None
        self.waiting.sort()
        try:
            fd, path = tempfile.mkstemp(dir=directory, prefix="ids-", suffix=".run")
            self.runs.append(path)
            with os.fdopen(fd, "wb", buffering=_BUFFER) as run:
                dump = marshal.dump
                for pair in self.waiting:
                    dump(pair, run)
        except OSError as exc:
            raise ScratchError.of(directory, exc) from exc
        self.waiting = []

    def later_copies(self) -> set[int]:
        """The positions of every copy of an id after its first (once; removes the runs)."""
        self.waiting.sort()
        sources: list[Iterator[tuple[str, int]]] = [_read_run(path) for path in self.runs]
        sources.append(iter(self.waiting))
        later: set[int] = set()
        previous = None
        for episode_id, position in heapq.merge(*sources):
            if episode_id == previous:
                later.add(position)  # pairs sort by position within an id: the first came first
            previous = episode_id
        self.waiting = []
        self.discard()
        return later

    def discard(self) -> None:
        for path in self.runs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self.runs = []
