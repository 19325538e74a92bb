"""Rejected input on a console, bounded: what `check` and `up` print about bad lines.

The first `limit` rejections are printed one by one; past that they are counted by reason,
and a live run prints those counts at most once per `interval_s` (a file of 194,000 bad
lines gives a few dozen lines of output, not 194,000). `totals` closes the report.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

DEFAULT_LIMIT = 20
DEFAULT_INTERVAL_S = 10.0


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{reason} {n:,}" for reason, n in counter.most_common())


class RejectionLog:
    """Decides which rejections to print. `add` returns the line to print now, if any."""

    def __init__(
        self,
        limit: int = DEFAULT_LIMIT,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.interval_s = interval_s
        self.clock = clock
        self.by_reason: Counter[str] = Counter()
        self._unshown: Counter[str] = Counter()  # past the limit, since the last count line
        self._last_count_line = clock()

    @property
    def total(self) -> int:
        return self.by_reason.total()

    def add(self, reason: str, description: str) -> str | None:
        """`description` (where and what: `file:12: invalid_json: …`) is returned while
        under the limit."""
        self.by_reason[reason] += 1
        if self.total <= self.limit:
            return description
        self._unshown[reason] += 1
        if self.total == self.limit + 1:
            self._last_count_line = self.clock()
            return f"more than {self.limit} rejected: counting them by reason from here"
        now = self.clock()
        if now - self._last_count_line >= self.interval_s:
            self._last_count_line = now
            return self._flush()
        return None

    def _flush(self) -> str:
        line = f"… {self._unshown.total():,} more rejected: {_counts(self._unshown)}"
        self._unshown.clear()
        return line

    def totals(self) -> list[str]:
        """The closing lines: counts not printed yet, and the totals by reason when any
        rejection went unprinted."""
        if self.total <= self.limit:
            return []
        lines = [self._flush()] if self._unshown else []
        lines.append(f"{self.total:,} rejected in all: {_counts(self.by_reason)}")
        return lines
