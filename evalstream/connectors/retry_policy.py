"""One retry policy for evalstream's HTTP clients: the LLM judge, the alert sinks and the
live-replay client.

- `BackoffPolicy`: a bounded number of attempts and one back-off, exponential with equal
  jitter and capped; a server's `Retry-After` hint replaces the computed pause (also capped).
  `BackoffPolicy.run` drives a simple loop with `tenacity`; a loop that must do work between
  attempts (the judge gives back its concurrency slot and budget reservation) asks
  `may_retry` and `delay` itself, so both kinds wait by the same formula.
- `retry_after_s`: the one `Retry-After` parser (`retry-after-ms`, then `retry-after` in
  seconds or as an HTTP date; negative, non-finite, past or garbled values are ignored).
- `api_should_retry`: the Messages API's rule for which answers are worth another try.

The random source and the sleep are injected, so tests see every pause without waiting.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Generic, TypeVar

import tenacity

__all__ = [
    "API_RETRY_STATUSES",
    "Attempt",
    "BackoffPolicy",
    "Sleep",
    "api_should_retry",
    "retry_after_s",
]

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
# Rate limited (429), overloaded (529), timed out, conflicting or failing server side.
API_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


@dataclass(frozen=True, slots=True)
class Attempt(Generic[T]):
    """What one try came to: its result, whether another try may help, and the pause the
    server asked for (`retry_after_s`), if any."""

    result: T
    retryable: bool = False
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """At most `max_attempts` tries in all; between them an exponential pause that starts at
    `initial_s` and is capped at `max_s`."""

    initial_s: float
    max_s: float
    max_attempts: int

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {self.max_attempts!r}")
        for name in ("initial_s", "max_s"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):  # also rejects NaN
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    def may_retry(self, attempts_made: int) -> bool:
        """Whether another try is allowed after `attempts_made` tries."""
        return attempts_made < self.max_attempts

    def delay(self, retry: int, rng: random.Random, server_hint: float | None = None) -> float:
        """The pause before retry number `retry` (1: the first retry).

        Equal jitter: half of the exponential step is fixed, the other half drawn uniformly.
        Full jitter (anywhere in [0, step]) spreads retries a little more, but it can also
        retry almost at once, several times in a row; with a bounded attempt count that
        would spend the attempts in a moment against a server that asked us to slow down.
        The fixed half guarantees the attempts span at least half the back-off schedule,
        while the random half still keeps concurrent clients from retrying in lockstep.
        """
        if server_hint is not None:
            return min(server_hint, self.max_s)
        step = min(self.max_s, self.initial_s * 2.0 ** max(0, retry - 1))
        return step / 2.0 + rng.uniform(0.0, step / 2.0)

    async def run(
        self,
        attempt: Callable[[], Awaitable[Attempt[T]]],
        *,
        rng: random.Random,
        sleep: Sleep,
        on_retry: Callable[[Attempt[T], float], None] | None = None,
    ) -> Attempt[T]:
        """Tries `attempt` until it is not retryable or the attempts are spent, and returns
        the last `Attempt`. `on_retry(failed, pause)` is told before each pause. An exception
        from `attempt` is not retried: it propagates."""

        def last_of(state: tenacity.RetryCallState) -> Attempt[T]:
            assert state.outcome is not None
            result: Attempt[T] = state.outcome.result()
            return result

        def wait(state: tenacity.RetryCallState) -> float:
            return self.delay(state.attempt_number, rng, last_of(state).retry_after_s)

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if on_retry is not None and state.next_action is not None:
                on_retry(last_of(state), state.next_action.sleep)

        retrying = tenacity.AsyncRetrying(
            sleep=sleep,
            stop=tenacity.stop_after_attempt(self.max_attempts),
            wait=wait,
            retry=tenacity.retry_if_result(lambda outcome: bool(outcome.retryable)),
            before_sleep=before_sleep,
            retry_error_callback=last_of,  # attempts spent: the last answer, not RetryError
        )
        return await retrying(attempt)


def retry_after_s(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asks to wait, or None when it asks nothing usable.

    `retry-after-ms` (milliseconds, the Anthropic API's precise form) wins; else `retry-after`
    as seconds or as an HTTP date, measured from `now` (Unix seconds). Negative, non-finite
    and unparseable values are ignored, and so is a date already past (a skewed clock: the
    computed back-off is the safer pause). Header names are matched in any case.
    """
    lower = {name.lower(): value for name, value in headers.items()}
    millis = _non_negative(lower.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    raw = lower.get("retry-after")
    if raw is None:
        return None
    seconds = _non_negative(raw)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # HTTP dates are GMT
    wait = when.timestamp() - now
    return wait if wait >= 0 else None


def api_should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """The Messages API's rule: its `x-should-retry` header decides when present, else the
    status (`API_RETRY_STATUSES`)."""
    lower = {name.lower(): value for name, value in headers.items()}
    should = lower.get("x-should-retry")
    if should in ("true", "false"):
        return should == "true"
    return status in API_RETRY_STATUSES


def _non_negative(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if value >= 0 and math.isfinite(value) else None
