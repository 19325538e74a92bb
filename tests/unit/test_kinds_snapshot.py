"""snapshot.at / snapshot.final over the state dict built from `state:<key>:changed` signals.

Every case also runs the reference evaluator and requires the same verdict. Signal ids are
s1, s2, ... in order; `decided_at=None` means decided when the episode closed.
"""

from __future__ import annotations

from typing import Any

import pytest

from evalstream.assertions.evaluation.engine import AssertionOutcome
from evalstream.assertions.evaluation.registry import parse_assertion
from evalstream.assertions.testing import SignalFactory, evaluate_agreeing
from evalstream.assertions.wire.signals import Signal

JSON = Any
Step = str | tuple[str, JSON]


def episode(*steps: Step) -> list[Signal]:
    f = SignalFactory()
    return [f(step) if isinstance(step, str) else f(step[0], step[1]) for step in steps]


def change(key: str, value: JSON) -> tuple[str, JSON]:
    """A `state:<key>:changed` signal setting `key` to `value`."""
    return (f"state:{key}:changed", {"key": key, "oldValue": None, "newValue": value})


def evaluate(spec: dict[str, JSON], signals: list[Signal]) -> AssertionOutcome:
    return evaluate_agreeing(spec, signals)


def check(
    spec: dict[str, JSON], signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    outcome = evaluate(spec, signals)
    assert outcome.verdict == verdict, outcome.message
    assert outcome.decided_at == decided_at, outcome.message


ANALYSIS = episode(
    "harness:start",
    change("analysis", {"confidence": 0.4, "tags": ["a", "b"], "owner": None}),
    change("files", [{"path": "src/a.py", "lines": 10}, {"path": "src/b.py", "lines": 20}]),
    change("analysis", {"confidence": 0.9, "tags": ["sql", "security"], "owner": None}),
    "harness:end",
)

# --- snapshot.final --------------------------------------------------------------------------

FINAL_CASES = [
    pytest.param({"path": "analysis.confidence", "value": 0.9}, "pass", id="equal"),
    pytest.param({"path": "analysis.confidence", "value": 0.4}, "fail", id="earlier-value"),
    pytest.param({"path": "analysis.confidence", "value": {"gte": 0.8}}, "pass", id="gte"),
    pytest.param({"path": "analysis.confidence", "value": {"lt": 0.8}}, "fail", id="lt"),
    pytest.param({"path": "analysis.tags", "value": {"contains": "sql"}}, "pass", id="contains"),
    pytest.param({"path": "analysis.tags", "value": ["sql"]}, "fail", id="list-length-differs"),
    pytest.param({"path": "analysis", "value": {"confidence": 0.9}}, "pass", id="partial-object"),
    pytest.param({"path": "analysis.owner", "value": None}, "pass", id="explicit-null"),
    pytest.param({"path": "analysis.missing", "value": None}, "fail", id="null-is-not-missing"),
    pytest.param({"path": "files[1].path", "value": "src/b.py"}, "pass", id="list-index"),
    pytest.param({"path": "files[0].lines", "value": {"between": [5, 15]}}, "pass", id="idx-0"),
    pytest.param({"path": "files[2].path", "exists": True}, "fail", id="index-out-of-range"),
    pytest.param({"path": "files.path", "exists": True}, "fail", id="key-on-a-list"),
    pytest.param({"path": "analysis[0]", "exists": True}, "fail", id="index-on-an-object"),
    pytest.param({"path": "analysis.tags[1]", "value": "security"}, "pass", id="nested-index"),
    pytest.param({"path": "analysis.confidence"}, "pass", id="exists-by-default"),
    pytest.param({"path": "analysis.confidence", "exists": True}, "pass", id="exists-true"),
    pytest.param({"path": "plan.steps", "exists": True}, "fail", id="exists-true-missing"),
    pytest.param({"path": "plan.steps"}, "fail", id="missing-path-fails"),
    pytest.param({"path": "plan.steps", "exists": False}, "pass", id="exists-false-absent"),
    pytest.param({"path": "analysis.tags", "exists": False}, "fail", id="exists-false-present"),
]


@pytest.mark.parametrize(("spec", "verdict"), FINAL_CASES)
def test_snapshot_final(spec: dict[str, JSON], verdict: str) -> None:
    check({"type": "snapshot.final", **spec}, ANALYSIS, verdict, None)


STATE_SOURCE_CASES = [
    pytest.param(
        episode(("harness:start", {"state": {"mode": "draft", "n": 1}}), "harness:end"),
        "mode",
        "draft",
        id="harness-start-initial-state",
    ),
    pytest.param(
        episode(("harness:start", {"state": {"mode": "draft", "n": 1}}), change("n", 2)),
        "mode",
        "draft",
        id="a-change-keeps-other-initial-keys",
    ),
    pytest.param(
        episode(("harness:start", {"state": {"mode": "draft", "n": 1}}), change("n", 2)),
        "n",
        2,
        id="a-change-overrides-the-initial-key",
    ),
    pytest.param(
        episode(("state:plan:changed", {"newValue": {"steps": 3}})),
        "plan.steps",
        3,
        id="key-taken-from-the-name",
    ),
    pytest.param(
        episode(("state:plan:changed", {"key": "other", "newValue": 7})),
        "other",
        7,
        id="payload-key-wins-over-the-name",
    ),
    pytest.param(
        episode(change("plan", 1), change("plan", 2), change("plan", 3)),
        "plan",
        3,
        id="last-change-wins",
    ),
]


@pytest.mark.parametrize(("signals", "path", "expected"), STATE_SOURCE_CASES)
def test_snapshot_final_state_sources(signals: list[Signal], path: str, expected: JSON) -> None:
    check({"type": "snapshot.final", "path": path, "value": expected}, signals, "pass", None)
    # and the same path with a different expected value fails: the state really was read
    check({"type": "snapshot.final", "path": path, "value": "-"}, signals, "fail", None)


def test_snapshot_final_on_an_empty_episode_fails() -> None:
    check({"type": "snapshot.final", "path": "plan"}, [], "fail", None)
    check({"type": "snapshot.final", "path": "plan", "exists": False}, [], "pass", None)


def test_snapshot_ignores_changes_that_are_not_state_signals() -> None:
    signals = episode(("state:changed", {"key": "plan", "newValue": 1}), ("plan:changed", 1))
    check({"type": "snapshot.final", "path": "plan", "exists": False}, signals, "pass", None)


# --- snapshot.at -----------------------------------------------------------------------------

PLAN_EPISODE = episode(
    "harness:start",  # s1
    change("plan", {"steps": []}),  # s2
    "plan:complete",  # s3
    change("plan", {"steps": ["a", "b"]}),  # s4
    "plan:complete",  # s5
    "harness:end",  # s6
)

AT_CASES = [
    pytest.param(
        {"afterSignal": "plan:complete", "path": "plan.steps", "exists": True},
        "pass",
        "s3",
        id="exists-right-after-the-first-occurrence",
    ),
    pytest.param(
        {"afterSignal": "plan:complete", "path": "plan.steps", "value": []},
        "pass",
        "s3",
        id="value-at-that-moment-not-the-final-one",
    ),
    pytest.param(
        {"afterSignal": "plan:complete", "path": "plan.steps", "value": ["a", "b"]},
        "fail",
        "s3",
        id="only-the-first-occurrence-counts",
    ),
    pytest.param(
        {"afterSignal": "plan:*", "path": "plan.steps", "value": []},
        "pass",
        "s3",
        id="glob-after-signal",
    ),
    pytest.param(
        {"afterSignal": "state:plan:changed", "path": "plan.steps", "value": []},
        "pass",
        "s2",
        id="includes-the-after-signal-itself",
    ),
    pytest.param(
        {"afterSignal": "harness:start", "path": "plan", "exists": False},
        "pass",
        "s1",
        id="exists-false-before-any-change",
    ),
    pytest.param(
        {"afterSignal": "harness:start", "path": "plan", "exists": True},
        "fail",
        "s1",
        id="missing-path-fails-at-once",
    ),
    pytest.param(
        {"afterSignal": "code:complete", "path": "plan", "exists": True},
        "fail",
        None,
        id="after-signal-never-occurs",
    ),
    pytest.param(
        {"afterSignal": "harness:end", "path": "plan.steps[1]", "value": {"startsWith": "b"}},
        "pass",
        "s6",
        id="list-index-with-matcher",
    ),
]


@pytest.mark.parametrize(("spec", "verdict", "decided_at"), AT_CASES)
def test_snapshot_at(spec: dict[str, JSON], verdict: str, decided_at: str | None) -> None:
    check({"type": "snapshot.at", **spec}, PLAN_EPISODE, verdict, decided_at)


@pytest.mark.parametrize(
    ("path", "expected", "verdict"),
    [
        pytest.param("mode", "draft", "pass", id="initial-state-visible"),
        pytest.param("mode", "final", "fail", id="later-change-not-yet-applied"),
    ],
)
def test_snapshot_at_sees_harness_start_initial_state(
    path: str, expected: JSON, verdict: str
) -> None:
    signals = episode(
        ("harness:start", {"state": {"mode": "draft"}}),
        "agent:activated",
        change("mode", "final"),
    )
    spec = {"type": "snapshot.at", "afterSignal": "agent:activated", "path": path}
    check({**spec, "value": expected}, signals, verdict, "s2")


# --- an explicit `value: null` is a different rule from "the path exists" --------------------

NULL_VALUE = {"type": "snapshot.final", "path": "owner", "value": None}
EXISTS = {"type": "snapshot.final", "path": "owner"}


def test_explicit_null_value_and_exists_are_different_rules() -> None:
    signals = episode(change("owner", "bob"))
    check(NULL_VALUE, signals, "fail", None)
    check(EXISTS, signals, "pass", None)


def test_explicit_null_value_survives_wire_and_rule_id() -> None:
    null_value, exists = parse_assertion(NULL_VALUE), parse_assertion(EXISTS)
    assert null_value.rule_id() != exists.rule_id()
    assert null_value.wire() == NULL_VALUE
