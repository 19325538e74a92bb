"""Which input items repeat an episode id read earlier, found without a set of every id.

A scoring run keeps the first copy of an episode id (and a run split across processes goes
back to one process when any id repeats). Remembering every id read would grow with the
input; `IdLedger` instead notes (id, input position) pairs and sorts them in runs written to
scratch files (`spilled_sort`); once the input is read, equal ids come out side by side and
every copy after the first (by position) is reported. Memory holds one run's pairs and the
repeats found.
"""

from __future__ import annotations

import marshal

from evalstream.stream.spilled_sort import SpilledSort, marshal_frames


def _as_is(pair: tuple[str, int]) -> tuple[str, int]:
    return pair  # by id, then by input position


class IdLedger:
    """Episode ids with their input positions in; the positions of later copies out."""

    def __init__(self, directory: str | None, run_size: int) -> None:
        self.pairs: SpilledSort[tuple[str, int]] = SpilledSort(
            directory, run_size, key=_as_is, write=marshal.dump, read=marshal_frames, prefix="ids-"
        )

    def add(self, episode_id: str, position: int) -> None:
        self.pairs.add((episode_id, position))

    def later_copies(self) -> set[int]:
        """The positions of every copy of an id after its first (once; removes the runs)."""
        later: set[int] = set()
        previous = None
        for episode_id, position in self.pairs.in_order():
            if episode_id == previous:
                later.add(position)  # pairs sort by position within an id: the first came first
            previous = episode_id
        return later

    def discard(self) -> None:
        self.pairs.discard()
