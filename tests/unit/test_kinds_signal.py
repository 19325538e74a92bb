"""signal.contains / not / count / trajectory / first / last.

Every case runs the incremental engine (`run_assertions`) and the reference evaluator
(`run_reference`) on the same episode and requires the same verdict from both. Signals made by
`episode()` get the ids s1, s2, ... in order, so `decided_at="s3"` reads "decided by the third
signal"; `None` means "decided when the episode closed".
"""

from __future__ import annotations

from typing import Any

import pytest

from evalstream.assertions.evaluation.engine import AssertionOutcome
from evalstream.assertions.testing import SignalFactory, evaluate_agreeing
from evalstream.assertions.wire.signals import Signal

JSON = Any
Step = str | tuple[str, JSON]


def episode(*steps: Step) -> list[Signal]:
    """Signals named (and optionally with payloads) as given, with ids s1, s2, ..."""
    f = SignalFactory()
    return [f(step) if isinstance(step, str) else f(step[0], step[1]) for step in steps]


def evaluate(spec: dict[str, JSON], signals: list[Signal]) -> AssertionOutcome:
    """The engine's outcome, after checking the reference evaluator agrees on the verdict."""
    return evaluate_agreeing(spec, signals)


def check(
    spec: dict[str, JSON], signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    outcome = evaluate(spec, signals)
    assert outcome.verdict == verdict, outcome.message
    assert outcome.decided_at == decided_at, outcome.message


def edit(name: str = "Edit") -> tuple[str, JSON]:
    return ("tool:call", {"name": name})


# --- signal.contains -------------------------------------------------------------------------

CONTAINS_CASES = [
    pytest.param(
        {"pattern": "tool:call"},
        episode("harness:start", "tool:call", "harness:end"),
        "pass",
        "s2",
        id="literal-found-passes-at-once",
    ),
    pytest.param(
        {"pattern": "tool:*"},
        episode("harness:start", "tool:result", "harness:end"),
        "pass",
        "s2",
        id="glob-found",
    ),
    pytest.param(
        {"pattern": "tool:call"},
        episode("harness:start", "tool:result", "harness:end"),
        "fail",
        None,
        id="absent-fails-at-close",
    ),
    pytest.param({"pattern": "tool:call"}, [], "fail", None, id="empty-episode"),
    pytest.param(
        {"pattern": "tool:call", "payload": {"name": "Edit"}},
        episode("harness:start", edit("Read"), ("tool:call", {"name": "Edit", "id": "t1"})),
        "pass",
        "s3",
        id="payload-partial-match-skips-non-matching",
    ),
    pytest.param(
        {"pattern": "tool:call", "payload": {"name": "Edit"}},
        episode(edit("Read"), edit("Bash")),
        "fail",
        None,
        id="payload-never-matches",
    ),
    pytest.param(
        {"pattern": "review:done", "payload": {"score": {"gte": 3}}},
        episode(("review:done", {"score": 2}), ("review:done", {"score": 4})),
        "pass",
        "s2",
        id="payload-value-matcher",
    ),
    pytest.param(
        {"pattern": "tool:call", "payload": {"name": "Edit"}},
        episode(("tool:call", "Edit")),
        "fail",
        None,
        id="payload-not-an-object",
    ),
]


@pytest.mark.parametrize(("spec", "signals", "verdict", "decided_at"), CONTAINS_CASES)
def test_signal_contains(
    spec: dict[str, JSON], signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    check({"type": "signal.contains", **spec}, signals, verdict, decided_at)


# --- signal.not ------------------------------------------------------------------------------

NOT_CASES = [
    pytest.param(
        {"pattern": "agent:error"},
        episode("harness:start", "tool:call", "harness:end"),
        "pass",
        None,
        id="absent-passes-at-close",
    ),
    pytest.param(
        {"pattern": "agent:error"},
        episode("harness:start", "agent:error", "tool:call", "harness:end"),
        "fail",
        "s2",
        id="forbidden-fails-at-once",
    ),
    pytest.param(
        {"pattern": "error:*"},
        episode("harness:start", "error:api", "harness:end"),
        "fail",
        "s2",
        id="glob",
    ),
    pytest.param(
        {"pattern": "error:*"},
        episode("harness:start", "error:api:timeout", "harness:end"),
        "pass",
        None,
        id="single-star-does-not-cross-colon",
    ),
    pytest.param(
        {"pattern": "error:**"},
        episode("harness:start", "error:api:timeout", "harness:end"),
        "fail",
        "s2",
        id="double-star-crosses-colon",
    ),
    pytest.param(
        {"pattern": "tool:call", "payload": {"name": "Bash"}},
        episode(edit("Read"), edit("Edit")),
        "pass",
        None,
        id="payload-restricts-what-is-forbidden",
    ),
    pytest.param(
        {"pattern": "tool:call", "payload": {"name": "Bash"}},
        episode(edit("Read"), edit("Bash"), edit("Edit")),
        "fail",
        "s2",
        id="payload-forbidden-found",
    ),
]


@pytest.mark.parametrize(("spec", "signals", "verdict", "decided_at"), NOT_CASES)
def test_signal_not(
    spec: dict[str, JSON], signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    check({"type": "signal.not", **spec}, signals, verdict, decided_at)


# --- signal.count ----------------------------------------------------------------------------

THREE_CALLS = episode("harness:start", "tool:call", "text:delta", "tool:call", "tool:call")

COUNT_CASES = [
    pytest.param({"exact": 3}, THREE_CALLS, "pass", None, id="exact-met-waits-for-close"),
    pytest.param({"exact": 2}, THREE_CALLS, "fail", "s5", id="exact-exceeded-fails-at-once"),
    pytest.param({"exact": 4}, THREE_CALLS, "fail", None, id="exact-short-fails-at-close"),
    pytest.param({"exact": 0}, episode("harness:start"), "pass", None, id="exact-zero"),
    pytest.param({"min": 2}, THREE_CALLS, "pass", "s4", id="min-reached-passes-at-once"),
    pytest.param({"min": 4}, THREE_CALLS, "fail", None, id="min-not-reached"),
    pytest.param({"max": 3}, THREE_CALLS, "pass", None, id="max-met-waits-for-close"),
    pytest.param({"max": 1}, THREE_CALLS, "fail", "s4", id="max-exceeded-fails-at-once"),
    pytest.param({"max": 0}, episode("harness:start"), "pass", None, id="max-zero-none"),
    pytest.param({"min": 1, "max": 3}, THREE_CALLS, "pass", None, id="range-met"),
    pytest.param({"min": 1, "max": 2}, THREE_CALLS, "fail", "s5", id="range-exceeded"),
    pytest.param({"min": 4, "max": 9}, THREE_CALLS, "fail", None, id="range-short"),
]


@pytest.mark.parametrize(("bounds", "signals", "verdict", "decided_at"), COUNT_CASES)
def test_signal_count(
    bounds: dict[str, JSON], signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    check({"type": "signal.count", "pattern": "tool:call", **bounds}, signals, verdict, decided_at)


@pytest.mark.parametrize(
    ("exact", "verdict", "decided_at"),
    [
        pytest.param(2, "pass", None, id="counts-only-matching-payloads"),
        pytest.param(1, "fail", "s4", id="second-matching-payload-exceeds"),
    ],
)
def test_signal_count_with_payload(exact: int, verdict: str, decided_at: str | None) -> None:
    signals = episode(edit("Edit"), edit("Read"), edit("Read"), edit("Edit"), edit("Bash"))
    spec = {"type": "signal.count", "pattern": "tool:call", "payload": {"name": "Edit"}}
    check({**spec, "exact": exact}, signals, verdict, decided_at)


# --- signal.trajectory -----------------------------------------------------------------------

ABC = ["a:x", "b:x", "c:x"]

TRAJECTORY_CASES = [
    # non-strict: an in-order subsequence
    pytest.param(
        {"patterns": ABC},
        episode("a:x", "noise", "b:x", "noise", "c:x", "noise"),
        "pass",
        "s5",
        id="loose-subsequence-passes-at-last-step",
    ),
    pytest.param(
        {"patterns": ABC},
        episode("a:x", "c:x", "b:x"),
        "fail",
        None,
        id="loose-out-of-order",
    ),
    pytest.param(
        {"patterns": ABC},
        episode("a:x", "b:x"),
        "fail",
        None,
        id="loose-missing-last-step",
    ),
    pytest.param(
        {"patterns": ["a:x", "a:x"]},
        episode("a:x", "b:x"),
        "fail",
        None,
        id="loose-repeated-step-needs-two-signals",
    ),
    pytest.param(
        {"patterns": ["a:x", "a:x"]},
        episode("a:x", "b:x", "a:x"),
        "pass",
        "s3",
        id="loose-repeated-step-found-twice",
    ),
    pytest.param(
        {"patterns": ["harness:*", "tool:**", "harness:end"]},
        episode("harness:start", "tool:call:x", "harness:end"),
        "pass",
        "s3",
        id="loose-globs",
    ),
    # strict: contiguous, anchored at the first signal matching the first step
    pytest.param(
        {"patterns": ABC, "strict": True},
        episode("noise", "a:x", "b:x", "c:x", "noise"),
        "pass",
        "s4",
        id="strict-contiguous-passes-at-last-step",
    ),
    pytest.param(
        {"patterns": ABC, "strict": True},
        episode("a:x", "b:x", "noise", "c:x", "harness:end"),
        "fail",
        "s3",
        id="strict-gap-fails-at-once",
    ),
    pytest.param(
        {"patterns": ABC, "strict": True},
        episode("a:x", "c:x", "b:x"),
        "fail",
        "s2",
        id="strict-wrong-order-fails-at-once",
    ),
    pytest.param(
        {"patterns": ABC, "strict": True},
        episode("a:x", "b:x"),
        "fail",
        None,
        id="strict-episode-ends-mid-trajectory",
    ),
    pytest.param(
        {"patterns": ABC, "strict": True},
        episode("noise", "b:x", "c:x"),
        "fail",
        None,
        id="strict-first-step-never-matched",
    ),
    pytest.param(
        {"patterns": ["a:x", "b:x"], "strict": True},
        episode("a:x", "noise", "a:x", "b:x"),
        "fail",
        "s2",
        id="strict-anchors-at-first-match-of-first-step",
    ),
    pytest.param(
        {"patterns": ABC, "strict": True, "ignore": ["text:delta"]},
        episode("a:x", "text:delta", "b:x", "text:delta", "text:delta", "c:x"),
        "pass",
        "s6",
        id="strict-ignore-skips-listed-names",
    ),
    pytest.param(
        {"patterns": ABC, "strict": True, "ignore": ["text:*"]},
        episode("a:x", "text:delta", "b:x", "tool:call", "c:x"),
        "fail",
        "s4",
        id="strict-ignore-only-skips-listed-names",
    ),
    pytest.param(
        {"patterns": ABC, "strict": True},
        episode("a:x", "text:delta", "b:x", "c:x"),
        "fail",
        "s2",
        id="strict-without-ignore-counts-deltas",
    ),
    pytest.param(
        {"patterns": ABC, "strict": False, "ignore": ["noise"]},
        episode("a:x", "noise", "b:x", "other", "c:x"),
        "pass",
        "s5",
        id="loose-ignore-changes-nothing",
    ),
]


@pytest.mark.parametrize(("spec", "signals", "verdict", "decided_at"), TRAJECTORY_CASES)
def test_signal_trajectory(
    spec: dict[str, JSON], signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    check({"type": "signal.trajectory", **spec}, signals, verdict, decided_at)


REVIEWER_THEN_FIXER = [
    "harness:start",
    {"pattern": "agent:activated", "payload": {"agent": "reviewer"}},
    {"pattern": "agent:activated", "payload": {"agent": "fixer"}},
]


def activated(agent: str) -> tuple[str, JSON]:
    return ("agent:activated", {"agent": agent})


PAYLOAD_STEP_CASES = [
    pytest.param(
        False,
        episode("harness:start", activated("fixer"), activated("reviewer"), activated("fixer")),
        "pass",
        "s4",
        id="loose-skips-activation-with-other-payload",
    ),
    pytest.param(
        False,
        episode("harness:start", activated("fixer"), activated("reviewer")),
        "fail",
        None,
        id="loose-payload-order-wrong",
    ),
    pytest.param(
        True,
        episode("harness:start", activated("reviewer"), activated("fixer")),
        "pass",
        "s3",
        id="strict-payload-steps-contiguous",
    ),
    pytest.param(
        True,
        episode("harness:start", activated("planner"), activated("reviewer"), activated("fixer")),
        "fail",
        "s2",
        id="strict-name-matches-but-payload-breaks",
    ),
]


@pytest.mark.parametrize(("strict", "signals", "verdict", "decided_at"), PAYLOAD_STEP_CASES)
def test_signal_trajectory_payload_steps(
    strict: bool, signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    spec = {"type": "signal.trajectory", "patterns": REVIEWER_THEN_FIXER, "strict": strict}
    check(spec, signals, verdict, decided_at)


# --- signal.first / signal.last --------------------------------------------------------------

READ_EDIT_BASH = episode("harness:start", edit("Read"), edit("Edit"), edit("Bash"), "harness:end")

FIRST_LAST_CASES = [
    pytest.param("signal.first", None, READ_EDIT_BASH, "pass", "s2", id="first-any-payload"),
    pytest.param(
        "signal.first", {"name": "Read"}, READ_EDIT_BASH, "pass", "s2", id="first-matches"
    ),
    pytest.param(
        "signal.first",
        {"name": "Edit"},
        READ_EDIT_BASH,
        "fail",
        "s2",
        id="first-mismatch-fails-at-once-though-a-later-one-matches",
    ),
    pytest.param(
        "signal.first", None, episode("harness:start"), "fail", None, id="first-none-found"
    ),
    pytest.param(
        "signal.last", {"name": "Bash"}, READ_EDIT_BASH, "pass", None, id="last-matches-at-close"
    ),
    pytest.param(
        "signal.last",
        {"name": "Read"},
        READ_EDIT_BASH,
        "fail",
        None,
        id="last-mismatch-though-an-earlier-one-matches",
    ),
    pytest.param("signal.last", None, READ_EDIT_BASH, "pass", None, id="last-any-payload"),
    pytest.param("signal.last", None, episode("harness:start"), "fail", None, id="last-none"),
]


@pytest.mark.parametrize(("kind", "payload", "signals", "verdict", "decided_at"), FIRST_LAST_CASES)
def test_signal_first_and_last(
    kind: str, payload: JSON, signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    spec: dict[str, JSON] = {"type": kind, "pattern": "tool:call"}
    if payload is not None:
        spec["payload"] = payload
    check(spec, signals, verdict, decided_at)


def test_early_verdict_carries_the_deciding_signal_time() -> None:
    f = SignalFactory(start_ms=1_000.0, step_ms=5.0)
    signals = [f("harness:start"), f("agent:error"), f("harness:end")]
    outcome = evaluate({"type": "signal.not", "pattern": "agent:error"}, signals)
    assert (outcome.verdict, outcome.decided_at, outcome.decided_ts) == ("fail", "s2", 1_005.0)
    assert "agent:error" in outcome.message
