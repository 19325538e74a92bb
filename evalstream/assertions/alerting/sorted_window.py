"""The last `maxlen` values in arrival order and, alongside, in sorted order.

A regression reference rolls by one value at a time and is re-estimated from its median and
quantiles; keeping it sorted with a binary search per value (insert the new one, delete the
evicted one) avoids sorting the whole window at every estimate.

`ordered` is element for element `sorted(window)` (a stable sort of the arrival order):
a new value goes after the values equal to it and the evicted value, the oldest, is the
first of those equal to it. A NaN has no place in a sorted order: while the window holds
one, `ordered` is None (callers then sort the arrival order themselves).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort_right
from collections import deque
from collections.abc import Iterator


class SortedWindow:
    """A bounded window of floats, oldest evicted first, kept sorted as it rolls."""

    __slots__ = ("_arrival", "_nan", "_sorted", "maxlen")

    def __init__(self, maxlen: int) -> None:
        self.maxlen = maxlen
        self._arrival: deque[float] = deque()
        self._sorted: list[float] = []  # the values other than NaN, stable-sorted
        self._nan = 0

    def append(self, value: float) -> None:
        arrival = self._arrival
        if len(arrival) >= self.maxlen:
            old = arrival.popleft()
            if math.isnan(old):
                self._nan -= 1
            else:
                del self._sorted[bisect_left(self._sorted, old)]
        arrival.append(value)
        if math.isnan(value):
            self._nan += 1
        else:
            insort_right(self._sorted, value)

    def clear(self) -> None:
        self._arrival.clear()
        self._sorted.clear()
        self._nan = 0

    @property
    def ordered(self) -> list[float] | None:
        """The values sorted (do not modify), or None while one of them is NaN."""
        return None if self._nan else self._sorted

    def __len__(self) -> int:
        return len(self._arrival)

    def __iter__(self) -> Iterator[float]:
        return iter(self._arrival)
