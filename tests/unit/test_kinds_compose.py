"""all / any / not: three-valued composition with early decision (DESIGN §4).

    all: fail if any child fails; else error if any child errors; else pass
    any: pass if any child passes; else error if any child errors; else fail
    not: pass <-> fail; error stays error

`all` fails at the first failure, `any` passes at the first pass, and an error alone never
decides early. Every case also runs the reference evaluator and requires the same verdict.
"""

from __future__ import annotations

from typing import Any

import pytest

from evalstream.assertions.evaluation.engine import AssertionOutcome
from evalstream.assertions.testing import (
    SignalFactory,
    evaluate_agreeing,
    run_assertions,
    run_reference,
)
from evalstream.assertions.wire.signals import Signal

JSON = Any
Spec = dict[str, JSON]


def _episode() -> list[Signal]:
    f = SignalFactory()
    return [
        f("harness:start"),  # s1
        f("provider:start", {"model": "mystery-model"}),  # s2
        f("provider:end", {"output": {"content": "x", "usage": {"inputTokens": 5}}}),  # s3
        f("tool:call", {"name": "Edit"}),  # s4
        f("agent:error", {"agent": "coder"}),  # s5
        f("harness:end", {"output": "done", "durationMs": 50}),  # s6
    ]


EPISODE = _episode()

# Leaves whose verdict and moment of decision on EPISODE are known:
P_EARLY: Spec = {"type": "signal.contains", "pattern": "tool:call"}  # pass at s4
P_EARLY_S5: Spec = {"type": "signal.contains", "pattern": "agent:error"}  # pass at s5
F_EARLY: Spec = {"type": "signal.not", "pattern": "agent:error"}  # fail at s5
F_EARLY_S4: Spec = {"type": "signal.not", "pattern": "tool:call"}  # fail at s4
P_CLOSE: Spec = {"type": "signal.not", "pattern": "never:seen"}  # pass at close
F_CLOSE: Spec = {"type": "signal.contains", "pattern": "never:seen"}  # fail at close
E_CLOSE: Spec = {"type": "metric.cost.max", "value": 1.0}  # error at close: unpriced model


def evaluate(spec: Spec, signals: list[Signal]) -> AssertionOutcome:
    return evaluate_agreeing(spec, signals)


def check(
    spec: Spec, verdict: str, decided_at: str | None, signals: list[Signal] = EPISODE
) -> None:
    outcome = evaluate(spec, signals)
    assert outcome.verdict == verdict, outcome.message
    assert outcome.decided_at == decided_at, outcome.message


def all_of(*children: Spec) -> Spec:
    return {"type": "all", "assertions": list(children)}


def any_of(*children: Spec) -> Spec:
    return {"type": "any", "assertions": list(children)}


def not_(child: Spec) -> Spec:
    return {"type": "not", "assertion": child}


@pytest.mark.parametrize(
    ("leaf", "verdict", "decided_at"),
    [
        pytest.param(P_EARLY, "pass", "s4", id="P_EARLY"),
        pytest.param(P_EARLY_S5, "pass", "s5", id="P_EARLY_S5"),
        pytest.param(F_EARLY, "fail", "s5", id="F_EARLY"),
        pytest.param(F_EARLY_S4, "fail", "s4", id="F_EARLY_S4"),
        pytest.param(P_CLOSE, "pass", None, id="P_CLOSE"),
        pytest.param(F_CLOSE, "fail", None, id="F_CLOSE"),
        pytest.param(E_CLOSE, "error", None, id="E_CLOSE"),
    ],
)
def test_the_leaves_used_below(leaf: Spec, verdict: str, decided_at: str | None) -> None:
    check(leaf, verdict, decided_at)


# --- the three-valued truth tables (children decided at close) -------------------------------

TRUTH_TABLE = [
    pytest.param(all_of(P_CLOSE, P_CLOSE), "pass", id="all-pass-pass"),
    pytest.param(all_of(P_CLOSE, F_CLOSE), "fail", id="all-pass-fail"),
    pytest.param(all_of(F_CLOSE, E_CLOSE), "fail", id="all-fail-error"),
    pytest.param(all_of(E_CLOSE, F_CLOSE), "fail", id="all-error-fail"),
    pytest.param(all_of(P_CLOSE, E_CLOSE), "error", id="all-pass-error"),
    pytest.param(all_of(E_CLOSE, P_CLOSE), "error", id="all-error-pass"),
    pytest.param(all_of(E_CLOSE, E_CLOSE), "error", id="all-error-error"),
    pytest.param(all_of(P_CLOSE), "pass", id="all-single"),
    pytest.param(any_of(F_CLOSE, F_CLOSE), "fail", id="any-fail-fail"),
    pytest.param(any_of(F_CLOSE, P_CLOSE), "pass", id="any-fail-pass"),
    pytest.param(any_of(E_CLOSE, P_CLOSE), "pass", id="any-error-pass"),
    pytest.param(any_of(P_CLOSE, E_CLOSE), "pass", id="any-pass-error"),
    pytest.param(any_of(F_CLOSE, E_CLOSE), "error", id="any-fail-error"),
    pytest.param(any_of(E_CLOSE, F_CLOSE), "error", id="any-error-fail"),
    pytest.param(any_of(E_CLOSE, E_CLOSE), "error", id="any-error-error"),
    pytest.param(any_of(F_CLOSE), "fail", id="any-single"),
    pytest.param(not_(P_CLOSE), "fail", id="not-pass"),
    pytest.param(not_(F_CLOSE), "pass", id="not-fail"),
    pytest.param(not_(E_CLOSE), "error", id="not-error"),
]


@pytest.mark.parametrize(("spec", "verdict"), TRUTH_TABLE)
def test_three_valued_truth_table(spec: Spec, verdict: str) -> None:
    check(spec, verdict, None)


# --- early decisions -------------------------------------------------------------------------

EARLY_CASES = [
    pytest.param(all_of(P_CLOSE, F_EARLY), "fail", "s5", id="all-fails-at-first-failure"),
    pytest.param(all_of(F_EARLY, E_CLOSE), "fail", "s5", id="all-failure-outranks-later-error"),
    pytest.param(
        all_of(F_EARLY, F_EARLY_S4), "fail", "s4", id="all-decided-by-the-earliest-failure"
    ),
    pytest.param(all_of(P_EARLY, P_EARLY_S5), "pass", "s5", id="all-passes-when-every-child-did"),
    pytest.param(all_of(P_EARLY, P_CLOSE), "pass", None, id="all-pass-waits-for-open-children"),
    pytest.param(all_of(P_EARLY, F_CLOSE), "fail", None, id="all-fail-at-close"),
    pytest.param(any_of(F_CLOSE, P_EARLY), "pass", "s4", id="any-passes-at-first-pass"),
    pytest.param(any_of(E_CLOSE, P_EARLY_S5), "pass", "s5", id="any-pass-outranks-error"),
    pytest.param(any_of(F_EARLY, F_EARLY_S4), "fail", "s5", id="any-fails-when-every-child-did"),
    pytest.param(any_of(F_EARLY, F_CLOSE), "fail", None, id="any-fail-waits-for-open-children"),
    pytest.param(any_of(F_EARLY_S4, P_CLOSE), "pass", None, id="any-pass-at-close"),
    pytest.param(not_(F_EARLY), "pass", "s5", id="not-inverts-early-failure"),
    pytest.param(not_(P_EARLY), "fail", "s4", id="not-inverts-early-pass"),
    pytest.param(not_(not_(P_EARLY)), "pass", "s4", id="double-negation"),
]


@pytest.mark.parametrize(("spec", "verdict", "decided_at"), EARLY_CASES)
def test_early_decision(spec: Spec, verdict: str, decided_at: str | None) -> None:
    check(spec, verdict, decided_at)


NESTED_CASES = [
    pytest.param(
        all_of(any_of(F_CLOSE, P_EARLY), not_(F_EARLY)),
        "pass",
        "s5",
        id="all-of-any-and-not",
    ),
    pytest.param(
        any_of(all_of(P_EARLY, F_EARLY), not_(P_CLOSE)),
        "fail",
        None,
        id="any-of-failing-all-and-failing-not",
    ),
    pytest.param(
        any_of(all_of(P_EARLY, P_EARLY_S5), F_CLOSE),
        "pass",
        "s5",
        id="inner-all-pass-decides-outer-any",
    ),
    pytest.param(not_(any_of(F_CLOSE, E_CLOSE)), "error", None, id="not-of-erroring-any"),
    pytest.param(
        all_of(any_of(E_CLOSE, P_EARLY), not_(F_CLOSE)),
        "pass",
        None,
        id="error-absorbed-by-inner-any",
    ),
    pytest.param(
        all_of(P_CLOSE, any_of(F_CLOSE, all_of(P_EARLY, F_EARLY_S4))),
        "fail",
        None,
        id="three-levels",
    ),
    pytest.param(
        not_(all_of(P_CLOSE, any_of(F_EARLY_S4, F_EARLY), P_EARLY)),
        "pass",
        "s5",
        id="not-of-all-failing-early-via-any",
    ),
]


@pytest.mark.parametrize(("spec", "verdict", "decided_at"), NESTED_CASES)
def test_nested_composition(spec: Spec, verdict: str, decided_at: str | None) -> None:
    check(spec, verdict, decided_at)


def test_composite_message_names_each_decided_child() -> None:
    outcome = evaluate(all_of(P_CLOSE, F_EARLY), EPISODE)
    assert outcome.message.startswith("all: ")
    assert "signal.not agent:error: fail" in outcome.message


def test_top_level_assertions_are_decided_independently() -> None:
    specs = [F_EARLY, all_of(P_EARLY), any_of(F_CLOSE)]
    outcomes = run_assertions(specs, EPISODE)
    assert [r.verdict for r in run_reference(specs, EPISODE)] == ["fail", "pass", "fail"]
    assert [(o.verdict, o.decided_at) for o in outcomes] == [
        ("fail", "s5"),
        ("pass", "s4"),
        ("fail", None),
    ]
    assert [o.index for o in outcomes] == [0, 1, 2]


# --- errors: an evaluator that errors mid-episode never decides a composite early ------------

# (a|aa)+$ backtracks exponentially on 'aaa...ab': the payload matcher times out -> `error`.
PATHOLOGICAL = "a" * 20_000 + "b"
E_EARLY: Spec = {
    "type": "signal.contains",
    "pattern": "tool:call",
    "payload": {"input": {"matches": "(a|aa)+$"}},
}


def with_pathological_call(*after: str) -> list[Signal]:
    f = SignalFactory()
    return [
        f("harness:start"),  # s1
        f("tool:call", {"name": "Bash", "input": PATHOLOGICAL}),  # s2: E_EARLY errors here
        *(f(name) for name in after),  # s3, ...
    ]


ERROR_EARLY_CASES = [
    pytest.param(E_EARLY, ["harness:end"], "error", "s2", id="the-leaf-errors-at-once"),
    pytest.param(
        all_of(E_EARLY, F_EARLY), ["harness:end"], "error", None, id="all-error-waits-for-close"
    ),
    pytest.param(
        all_of(E_EARLY, F_EARLY),
        ["agent:error", "harness:end"],
        "fail",
        "s3",
        id="all-later-failure-outranks-error",
    ),
    pytest.param(
        any_of(E_EARLY, P_EARLY_S5),
        ["harness:end"],
        "error",
        None,
        id="any-error-waits-for-close",
    ),
    pytest.param(
        any_of(E_EARLY, P_EARLY_S5),
        ["agent:error"],
        "pass",
        "s3",
        id="any-later-pass-outranks-error",
    ),
]


@pytest.mark.parametrize(("spec", "after", "verdict", "decided_at"), ERROR_EARLY_CASES)
def test_error_never_decides_early(
    spec: Spec, after: list[str], verdict: str, decided_at: str | None
) -> None:
    check(spec, verdict, decided_at, with_pathological_call(*after))


REGEX_BOMB: Spec = {"type": "output.matches", "regex": "(a|aa)+$"}
NO_SUCH_TEXT: Spec = {"type": "output.contains", "text": "no such text"}


@pytest.mark.parametrize(
    "children",
    [
        pytest.param([REGEX_BOMB, NO_SUCH_TEXT], id="error-first"),
        pytest.param([NO_SUCH_TEXT, REGEX_BOMB], id="failure-first"),
    ],
)
def test_errored_output_leaf_next_to_a_failing_sibling_gives_fail(children: list[Spec]) -> None:
    f = SignalFactory()
    signals = [f("harness:start"), f("harness:end", {"output": PATHOLOGICAL})]
    check(REGEX_BOMB, "error", None, signals)  # the regex leaf on its own errors ...
    check({"type": "all", "assertions": children}, "fail", None, signals)  # ... but fail wins
