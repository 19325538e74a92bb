"""The shared retry policy: the `Retry-After` parser, the back-off and the bounded loop."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest

from evalstream.connectors.retry_policy import (
    Attempt,
    BackoffPolicy,
    api_should_retry,
    retry_after_s,
)

NOW = 1_800_000_000.0


def http_date(offset_s: float) -> str:
    return format_datetime(datetime.fromtimestamp(NOW + offset_s, UTC), usegmt=True)


# --- Retry-After -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": " 1.5 "}, 1.5),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the precise form wins
        ({"Retry-After": "3"}, 3.0),  # any case
        ({"RETRY-AFTER-MS": "40"}, 0.04),
        ({"retry-after": http_date(42)}, 42.0),
        ({}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-5"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": ""}, None),
        ({"retry-after": http_date(-30)}, None),  # already past: a skewed clock
        ({"retry-after-ms": "-1", "retry-after": "2"}, 2.0),  # a bad ms falls back
        ({"retry-after-ms": "later", "retry-after": "2"}, 2.0),
        ({"retry-after-ms": "later"}, None),
    ],
)
def test_retry_after_forms(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_s(headers, NOW) == expected


def test_retry_after_reads_httpx_headers() -> None:
    headers = httpx.Headers([("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")])
    when = datetime(2015, 10, 21, 7, 28, tzinfo=UTC).timestamp()
    assert retry_after_s(headers, when - 12.5) == 12.5


def test_a_date_without_zone_is_read_as_gmt() -> None:
    naive = http_date(60).replace("GMT", "-0000")
    assert retry_after_s({"retry-after": naive}, NOW) == 60.0


def test_api_should_retry_obeys_the_server_then_the_status() -> None:
    assert api_should_retry(429, {})
    assert api_should_retry(529, {})
    assert api_should_retry(503, {})
    assert not api_should_retry(400, {})
    assert not api_should_retry(429, {"x-should-retry": "false"})
    assert api_should_retry(400, {"X-Should-Retry": "true"})


# --- back-off --------------------------------------------------------------------------------


def test_backoff_is_exponential_with_equal_jitter_and_capped() -> None:
    policy = BackoffPolicy(initial_s=0.5, max_s=4.0, max_attempts=5)
    rng = random.Random(3)
    for retry, step in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (12, 4.0)]:
        pauses = [policy.delay(retry, rng) for _ in range(300)]
        assert all(step / 2 <= p <= step for p in pauses)
        assert min(pauses) < step * 0.55  # the random half is spread over its range
        assert max(pauses) > step * 0.95


def test_backoff_draws_from_the_injected_random_source() -> None:
    policy = BackoffPolicy(initial_s=1.0, max_s=60.0, max_attempts=5)
    first = [policy.delay(r, random.Random(11)) for r in range(1, 6)]
    again = [policy.delay(r, random.Random(11)) for r in range(1, 6)]
    other = [policy.delay(r, random.Random(12)) for r in range(1, 6)]
    assert first == again
    assert first != other


def test_the_server_hint_replaces_the_back_off_up_to_the_cap() -> None:
    policy = BackoffPolicy(initial_s=0.5, max_s=4.0, max_attempts=5)
    rng = random.Random(1)
    assert policy.delay(1, rng, server_hint=3.0) == 3.0
    assert policy.delay(4, rng, server_hint=0.0) == 0.0  # "now" is honoured too
    assert policy.delay(1, rng, server_hint=600.0) == 4.0


def test_attempts_are_bounded() -> None:
    policy = BackoffPolicy(initial_s=0.5, max_s=4.0, max_attempts=3)
    assert [policy.may_retry(n) for n in (1, 2, 3, 4)] == [True, True, False, False]
    assert not BackoffPolicy(initial_s=0.5, max_s=4.0, max_attempts=1).may_retry(1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_attempts": 0}, "max_attempts must be an integer >= 1"),
        ({"max_attempts": True}, "max_attempts must be an integer >= 1"),
        ({"initial_s": -1.0}, "initial_s must be a finite number >= 0"),
        ({"max_s": float("nan")}, "max_s must be a finite number >= 0"),
        ({"max_s": float("inf")}, "max_s must be a finite number >= 0"),
    ],
)
def test_bad_policy_settings(kwargs: dict[str, float], match: str) -> None:
    args: dict[str, float] = {"initial_s": 0.5, "max_s": 4.0, "max_attempts": 3, **kwargs}
    with pytest.raises(ValueError, match=match):
        BackoffPolicy(**args)  # type: ignore[arg-type]


# --- the loop --------------------------------------------------------------------------------


class Script:
    """Answers attempts from a list; records the pauses the policy asks for."""

    def __init__(self, *answers: Attempt[str]) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.pauses: list[float] = []
        self.told: list[tuple[str, float]] = []

    async def attempt(self) -> Attempt[str]:
        answer = self.answers[self.calls]
        self.calls += 1
        return answer

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)

    def on_retry(self, failed: Attempt[str], pause: float) -> None:
        self.told.append((failed.result, pause))


def test_run_retries_until_an_answer_that_is_not_retryable() -> None:
    script = Script(
        Attempt("429", retryable=True, retry_after_s=2.0),
        Attempt("connection reset", retryable=True),
        Attempt("ok"),
    )
    policy = BackoffPolicy(initial_s=1.0, max_s=10.0, max_attempts=5)
    last = asyncio.run(
        policy.run(
            script.attempt, rng=random.Random(5), sleep=script.sleep, on_retry=script.on_retry
        )
    )
    assert last.result == "ok"
    assert script.calls == 3
    assert script.pauses[0] == 2.0  # the server's hint
    assert 1.0 <= script.pauses[1] <= 2.0  # the second retry's step is 2 s, half of it fixed
    assert script.told == [("429", 2.0), ("connection reset", script.pauses[1])]


def test_run_stops_at_a_permanent_failure() -> None:
    script = Script(Attempt("400 bad request"), Attempt("never asked"))
    policy = BackoffPolicy(initial_s=1.0, max_s=10.0, max_attempts=5)
    last = asyncio.run(policy.run(script.attempt, rng=random.Random(5), sleep=script.sleep))
    assert last.result == "400 bad request"
    assert (script.calls, script.pauses) == (1, [])


def test_run_returns_the_last_answer_when_the_attempts_are_spent() -> None:
    script = Script(*(Attempt(f"529 #{n}", retryable=True, retry_after_s=30.0) for n in range(5)))
    policy = BackoffPolicy(initial_s=1.0, max_s=8.0, max_attempts=3)
    last = asyncio.run(policy.run(script.attempt, rng=random.Random(5), sleep=script.sleep))
    assert last.result == "529 #2"
    assert last.retryable
    assert script.calls == 3
    assert script.pauses == [8.0, 8.0]  # the hint, capped


def test_run_does_not_retry_an_exception() -> None:
    calls = 0

    async def attempt() -> Attempt[str]:
        nonlocal calls
        calls += 1
        raise RuntimeError("a bug, not an outage")

    async def sleep(seconds: float) -> None:
        raise AssertionError("no pause expected")

    policy = BackoffPolicy(initial_s=1.0, max_s=8.0, max_attempts=3)
    with pytest.raises(RuntimeError, match="a bug"):
        asyncio.run(policy.run(attempt, rng=random.Random(5), sleep=sleep))
    assert calls == 1
