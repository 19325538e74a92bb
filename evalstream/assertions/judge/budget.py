"""The judge's spend budget: USD (and optionally tokens) per rolling hour and per rolling day.

A question *reserves* its worst case before it is sent (the request's input-token bound plus
`max_tokens`, priced at the dearest input rate) and *settles* to the usage the API reported
once it is answered, so however many questions are in flight, reserved plus settled spend
never exceeds a ceiling. A question whose reservation does not fit is refused with
`JudgeBudgetExhaustedError`; the assertion becomes `error`, never `pass`.

Spend is kept in one-minute buckets. A bucket counts against a window until its whole minute
has left the window, so a window counts at most one minute too much and never too little.
Pure: the caller passes the time (seconds since the epoch).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime

from evalstream.assertions.errors import EvaluationError

BUCKET_S = 60.0
WINDOWS: dict[str, float] = {"hour": 3_600.0, "day": 86_400.0}


class JudgeBudgetExhaustedError(EvaluationError):
    """The judge's budget for a window is spent; the question was not asked."""


@dataclass(frozen=True)
class BudgetLimits:
    """Ceilings per rolling window; None means no ceiling."""

    usd_per_hour: float | None = None
    usd_per_day: float | None = None
    tokens_per_hour: int | None = None
    tokens_per_day: int | None = None

    def usd(self, window: str) -> float | None:
        return self.usd_per_hour if window == "hour" else self.usd_per_day

    def tokens(self, window: str) -> int | None:
        return self.tokens_per_hour if window == "hour" else self.tokens_per_day

    @property
    def any(self) -> bool:
        return any(
            v is not None
            for v in (
                self.usd_per_hour,
                self.usd_per_day,
                self.tokens_per_hour,
                self.tokens_per_day,
            )
        )


@dataclass
class Reservation:
    """A question's worst case, held against every window until `SpendBudget.settle`."""

    usd: float
    tokens: int
    settled: bool = False


class _Window:
    """One rolling window's minute buckets, oldest first, with their running totals."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.length_s = WINDOWS[name]
        self.buckets: deque[list[float]] = deque()  # [start, usd, tokens]
        self.usd = 0.0
        self.tokens = 0.0

    def add(self, start: float, usd: float, tokens: int) -> None:
        if self.buckets and self.buckets[-1][0] == start:
            self.buckets[-1][1] += usd
            self.buckets[-1][2] += tokens
        else:
            self.buckets.append([start, usd, float(tokens)])
        self.usd += usd
        self.tokens += tokens

    def expire(self, now: float) -> None:
        while self.buckets and not _inside(self.buckets[0][0], self.length_s, now):
            _, usd, tokens = self.buckets.popleft()
            self.usd -= usd
            self.tokens -= tokens
        if not self.buckets:  # no float drift once the window is empty
            self.usd = self.tokens = 0.0

    def frees_at(self) -> float | None:
        """When the oldest spend in the window stops counting."""
        return self.buckets[0][0] + BUCKET_S + self.length_s if self.buckets else None


class SpendBudget:
    """Reserve before a call, settle after it; thread-safe, O(1) amortised per call."""

    def __init__(self, limits: BudgetLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._windows = {name: _Window(name) for name in WINDOWS}
        self._reserved_usd = 0.0
        self._reserved_tokens = 0

    # --- the two operations ---------------------------------------------------------------

    def reserve(self, usd: float, tokens: int, now: float) -> Reservation:
        """Holds `usd` and `tokens` against every window, or raises
        `JudgeBudgetExhaustedError`."""
        with self._lock:
            for window in self._windows.values():
                window.expire(now)
                usd_used = window.usd + self._reserved_usd
                usd_ceiling = self.limits.usd(window.name)
                if usd_ceiling is not None and usd_used + usd > usd_ceiling:
                    raise JudgeBudgetExhaustedError(
                        _refusal(window, f"${usd_used:.4f} of ${usd_ceiling:.4f}", "USD")
                        + f"; this question may cost up to ${usd:.4f}"
                    )
                tokens_used = int(window.tokens) + self._reserved_tokens
                token_ceiling = self.limits.tokens(window.name)
                if token_ceiling is not None and tokens_used + tokens > token_ceiling:
                    raise JudgeBudgetExhaustedError(
                        _refusal(window, f"{tokens_used:,} of {token_ceiling:,} tokens", "TOKENS")
                        + f"; this question may use up to {tokens:,} tokens"
                    )
            self._reserved_usd += usd
            self._reserved_tokens += tokens
            return Reservation(usd, tokens)

    def settle(self, reservation: Reservation, usd: float, tokens: int, now: float) -> None:
        """Replaces the reservation by what the call really cost (0 when nothing was billed)."""
        with self._lock:
            if reservation.settled:
                return
            reservation.settled = True
            self._reserved_usd = max(0.0, self._reserved_usd - reservation.usd)
            self._reserved_tokens = max(0, self._reserved_tokens - reservation.tokens)
            if usd or tokens:
                start = math.floor(now / BUCKET_S) * BUCKET_S
                for window in self._windows.values():
                    window.add(start, usd, tokens)

    # --- reading --------------------------------------------------------------------------

    def remaining_usd(self, window: str, now: float) -> float | None:
        """USD left in `window` (reservations count as spent), or None without a ceiling."""
        ceiling = self.limits.usd(window)
        if ceiling is None:
            return None
        with self._lock:
            state = self._windows[window]
            state.expire(now)
            return max(0.0, ceiling - state.usd - self._reserved_usd)

    def spent_usd(self, window: str, now: float) -> float:
        """Settled USD in `window` (without reservations)."""
        with self._lock:
            state = self._windows[window]
            state.expire(now)
            return max(0.0, state.usd)


def _refusal(window: _Window, used: str, unit: str) -> str:
    frees = window.frees_at()
    when = (
        f"; spend leaves the window from {datetime.fromtimestamp(frees, UTC):%H:%M} UTC"
        if frees is not None
        else ""
    )
    return (
        f"judge budget spent: {used} used in the last {window.name}{when}; the question was "
        f"not asked (raise EVALSTREAM_JUDGE_BUDGET_{unit}_PER_{window.name.upper()} to allow "
        "more)"
    )


def _inside(start: float, length_s: float, now: float) -> bool:
    """A bucket counts until its whole minute is older than the window."""
    return start + BUCKET_S > now - length_s


MESSAGE_OVERHEAD_TOKENS = 512
"""Tokens the API adds around the prompt and the schema: role markers, the tool definition
and the system prompt it adds for tool use (about 350 tokens); generous, because the bound
must not fall short."""


def input_token_bound(*texts: str) -> int:
    """An upper bound on the input tokens of a request made of `texts`: a byte-level BPE
    token covers at least one UTF-8 byte, so the byte count bounds the token count."""
    return sum(len(text.encode()) for text in texts) + MESSAGE_OVERHEAD_TOKENS
