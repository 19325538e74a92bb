"""agent.activated / completed / causedBy / emitted / skipped.

Episodes are built by small functions of a `SignalFactory`, so ids are s1, s2, ... in order
and parent links can name them. Every case also runs the reference evaluator and requires the
same verdict; `decided_at=None` means decided when the episode closed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from evalstream.assertions.evaluation.engine import AssertionOutcome
from evalstream.assertions.testing import SignalFactory, evaluate_agreeing
from evalstream.assertions.wire.signals import Signal

JSON = Any
Build = Callable[[SignalFactory], list[Signal]]


def evaluate(spec: dict[str, JSON], build: Build) -> AssertionOutcome:
    signals = build(SignalFactory())
    return evaluate_agreeing(spec, signals)


def check(spec: dict[str, JSON], build: Build, verdict: str, decided_at: str | None) -> None:
    outcome = evaluate(spec, build)
    assert outcome.verdict == verdict, outcome.message
    assert outcome.decided_at == decided_at, outcome.message


def activations(*agents: str) -> Build:
    """harness:start, then one `agent:activated {agent}` per name (s2, s3, ...)."""
    return lambda f: [f("harness:start"), *(f("agent:activated", {"agent": a}) for a in agents)]


# --- agent.activated -------------------------------------------------------------------------

ACTIVATED_CASES = [
    pytest.param({}, activations("coder"), "pass", "s2", id="default-at-least-once"),
    pytest.param({}, activations("planner", "coder"), "pass", "s3", id="default-skips-others"),
    pytest.param({}, activations("planner"), "fail", None, id="default-never-activated"),
    pytest.param(
        {},
        lambda f: [f("agent:activated", agent="coder")],
        "pass",
        "s1",
        id="source-agent-when-payload-has-none",
    ),
    pytest.param(
        {},
        lambda f: [f("agent:activated", {"agent": "planner"}, agent="coder")],
        "fail",
        None,
        id="payload-agent-wins-over-source-agent",
    ),
    pytest.param({"count": 2}, activations("coder", "coder"), "pass", None, id="count-met"),
    pytest.param({"count": 2}, activations("coder"), "fail", None, id="count-short"),
    pytest.param(
        {"count": 2},
        activations("coder", "x", "coder", "coder"),
        "fail",
        "s5",
        id="count-exceeded-fails-at-once",
    ),
    pytest.param({"min": 2}, activations("coder", "x", "coder"), "pass", "s4", id="min-reached"),
    pytest.param({"min": 2}, activations("coder", "x"), "fail", None, id="min-short"),
    pytest.param({"max": 1}, activations("coder"), "pass", None, id="max-met"),
    pytest.param({"max": 1}, activations(), "pass", None, id="max-allows-zero"),
    pytest.param({"max": 1}, activations("coder", "coder"), "fail", "s3", id="max-exceeded"),
    pytest.param({"min": 1, "max": 2}, activations("coder"), "pass", None, id="range-met"),
    pytest.param(
        {"min": 1, "max": 2}, activations("coder", "coder", "coder"), "fail", "s4", id="range-over"
    ),
]


@pytest.mark.parametrize(("bounds", "build", "verdict", "decided_at"), ACTIVATED_CASES)
def test_agent_activated(
    bounds: dict[str, JSON], build: Build, verdict: str, decided_at: str | None
) -> None:
    check({"type": "agent.activated", "agentId": "coder", **bounds}, build, verdict, decided_at)


# --- agent.completed -------------------------------------------------------------------------

COMPLETED_CASES = [
    pytest.param(activations("coder"), "pass", None, id="activated-without-error"),
    pytest.param(activations("planner"), "fail", None, id="never-activated"),
    pytest.param(
        lambda f: [
            f("agent:activated", {"agent": "coder"}),
            f("agent:error", {"agent": "coder", "message": "boom"}),
            f("harness:end"),
        ],
        "fail",
        "s2",
        id="agent-error-by-payload-agent-fails-at-once",
    ),
    pytest.param(
        lambda f: [
            f("agent:activated", {"agent": "coder"}),
            f("provider:error", {"error": "overloaded"}, agent="coder"),
            f("harness:end"),
        ],
        "fail",
        "s2",
        id="provider-error-by-source-agent",
    ),
    pytest.param(
        lambda f: [
            f("agent:activated", {"agent": "coder"}),
            f("agent:error", {"agent": "planner"}),
            f("provider:error", {}, agent="planner"),
        ],
        "pass",
        None,
        id="errors-of-other-agents-do-not-count",
    ),
    pytest.param(
        lambda f: [f("agent:activated", {"agent": "coder"}), f("agent:error", {"message": "?"})],
        "pass",
        None,
        id="unattributed-error-does-not-count",
    ),
    pytest.param(
        lambda f: [f("agent:error", {"agent": "coder"}), f("agent:activated", {"agent": "coder"})],
        "fail",
        "s1",
        id="error-before-activation-fails",
    ),
    pytest.param(
        lambda f: [
            f("agent:activated", {"agent": "coder"}),
            f("tool:error", {"agent": "coder"}),
        ],
        "pass",
        None,
        id="only-agent-and-provider-errors-count",
    ),
]


@pytest.mark.parametrize(("build", "verdict", "decided_at"), COMPLETED_CASES)
def test_agent_completed(build: Build, verdict: str, decided_at: str | None) -> None:
    check({"type": "agent.completed", "agentId": "coder"}, build, verdict, decided_at)


# --- agent.causedBy --------------------------------------------------------------------------


def fixer(f: SignalFactory, **kw: Any) -> Signal:
    payload = kw.pop("payload", {"agent": "fixer"})
    return f("agent:activated", payload, **kw)


CAUSED_BY_CASES = [
    pytest.param(
        False,
        lambda f: [f("harness:start"), f("review:complete"), fixer(f, parent="s2")],
        "pass",
        "s3",
        id="parent-link",
    ),
    pytest.param(
        False,
        lambda f: [f("review:complete"), f("tool:call"), fixer(f, parent="s2")],
        "fail",
        None,
        id="parent-does-not-match",
    ),
    pytest.param(
        False,
        lambda f: [
            f("review:complete"),
            f("agent:activated", {"agent": "planner"}, parent="s1"),
            fixer(f, parent="s2"),
        ],
        "fail",
        None,
        id="grandparent-needs-transitive",
    ),
    pytest.param(
        True,
        lambda f: [
            f("review:complete"),
            f("agent:activated", {"agent": "planner"}, parent="s1"),
            f("tool:call", {"name": "Edit"}, parent="s2"),
            f("noise"),
            fixer(f, parent="s3"),
        ],
        "pass",
        "s5",
        id="transitive-chain",
    ),
    pytest.param(
        True,
        lambda f: [
            f("review:complete"),
            f("agent:activated", {"agent": "planner"}, parent="s1"),
            f("tool:call", {"name": "Edit"}, parent="gone"),
            fixer(f, parent="s3"),
        ],
        "fail",
        None,
        id="transitive-chain-broken-by-dangling-link",
    ),
    pytest.param(
        True,
        lambda f: [f("review:complete"), fixer(f, parent="s1")],
        "pass",
        "s2",
        id="transitive-accepts-the-parent-too",
    ),
    pytest.param(
        False,
        lambda f: [f("review:complete"), fixer(f, payload={"agent": "fixer", "trigger": "x"})],
        "fail",
        None,
        id="no-link-and-trigger-does-not-match",
    ),
    pytest.param(
        False,
        lambda f: [
            f("harness:start"),
            fixer(f, payload={"agent": "fixer", "trigger": "review:complete"}),
        ],
        "pass",
        "s2",
        id="payload-trigger-fallback",
    ),
    pytest.param(
        False,
        lambda f: [
            f("harness:start"),
            fixer(f, payload={"agent": "fixer", "trigger": "review:complete"}, parent="s1"),
        ],
        "fail",
        None,
        id="payload-trigger-unused-when-a-parent-id-exists",
    ),
    pytest.param(
        False,
        lambda f: [f("review:complete"), fixer(f, parent="missing-id")],
        "fail",
        None,
        id="dangling-parent",
    ),
    pytest.param(
        False,
        lambda f: [fixer(f, parent="s2"), f("review:complete")],
        "fail",
        None,
        id="parent-after-child-is-not-a-cause",
    ),
    pytest.param(
        False,
        lambda f: [
            f("review:complete"),
            f("agent:activated", {"agent": "planner"}, parent="s1"),
        ],
        "fail",
        None,
        id="another-agent-caused-by-the-trigger",
    ),
    pytest.param(
        False,
        lambda f: [f("review:complete"), fixer(f), fixer(f, parent="s1")],
        "pass",
        "s3",
        id="any-activation-may-satisfy-it",
    ),
]


@pytest.mark.parametrize(("transitive", "build", "verdict", "decided_at"), CAUSED_BY_CASES)
def test_agent_caused_by(
    transitive: bool, build: Build, verdict: str, decided_at: str | None
) -> None:
    spec = {"type": "agent.causedBy", "agentId": "fixer", "triggerPattern": "review:complete"}
    check({**spec, "transitive": transitive}, build, verdict, decided_at)


def test_agent_caused_by_trigger_is_a_glob() -> None:
    spec = {"type": "agent.causedBy", "agentId": "fixer", "triggerPattern": "review:*"}

    def build(f: SignalFactory) -> list[Signal]:
        return [f("review:done"), fixer(f, parent="s1")]

    check(spec, build, "pass", "s2")
    check({**spec, "triggerPattern": "review:complete"}, build, "fail", None)


# --- agent.emitted ---------------------------------------------------------------------------

EMITTED_CASES = [
    pytest.param(
        "review:complete",
        lambda f: [f("harness:start"), f("review:complete", agent="reviewer")],
        "pass",
        "s2",
        id="by-source-agent",
    ),
    pytest.param(
        "review:complete",
        lambda f: [f("review:complete", {"agent": "reviewer"})],
        "pass",
        "s1",
        id="by-payload-agent",
    ),
    pytest.param(
        "review:*",
        lambda f: [f("review:started", agent="fixer"), f("review:done", agent="reviewer")],
        "pass",
        "s2",
        id="glob-and-other-agent-skipped",
    ),
    pytest.param(
        "review:complete",
        lambda f: [f("review:complete", agent="fixer"), f("review:complete")],
        "fail",
        None,
        id="emitted-by-someone-else",
    ),
    pytest.param(
        "review:complete",
        lambda f: [f("review:started", agent="reviewer"), f("harness:end")],
        "fail",
        None,
        id="agent-emitted-other-signals",
    ),
]


@pytest.mark.parametrize(("signal", "build", "verdict", "decided_at"), EMITTED_CASES)
def test_agent_emitted(signal: str, build: Build, verdict: str, decided_at: str | None) -> None:
    spec = {"type": "agent.emitted", "agentId": "reviewer", "signal": signal}
    check(spec, build, verdict, decided_at)


# --- agent.skipped ---------------------------------------------------------------------------


def skipped(agent: str, reason: str | None = None) -> Build:
    payload: dict[str, JSON] = {"agent": agent}
    if reason is not None:
        payload["reason"] = reason
    return lambda f: [
        f("harness:start"),
        f("agent:skipped", {"agent": "other", "reason": "guard returned false"}),
        f("agent:skipped", payload),
        f("harness:end"),
    ]


SKIPPED_CASES = [
    pytest.param(None, skipped("fixer"), "pass", "s3", id="without-reason"),
    pytest.param(None, skipped("fixer", "anything"), "pass", "s3", id="any-reason-accepted"),
    pytest.param(None, skipped("planner"), "fail", None, id="another-agent-skipped"),
    pytest.param(
        "no issues found", skipped("fixer", "no issues found"), "pass", "s3", id="reason-equal"
    ),
    pytest.param(
        "no issues found", skipped("fixer", "guard returned false"), "fail", None, id="reason-diff"
    ),
    pytest.param("no issues found", skipped("fixer"), "fail", None, id="reason-missing"),
    pytest.param(
        {"contains": "issues"},
        skipped("fixer", "no issues found"),
        "pass",
        "s3",
        id="reason-value-matcher",
    ),
    pytest.param(
        None,
        lambda f: [f("agent:skipped", {"reason": "guard"}, agent="fixer")],
        "pass",
        "s1",
        id="source-agent-when-payload-has-none",
    ),
    pytest.param(
        None,
        lambda f: [f("agent:activated", {"agent": "fixer"})],
        "fail",
        None,
        id="activation-is-not-a-skip",
    ),
]


@pytest.mark.parametrize(("reason", "build", "verdict", "decided_at"), SKIPPED_CASES)
def test_agent_skipped(reason: JSON, build: Build, verdict: str, decided_at: str | None) -> None:
    spec: dict[str, JSON] = {"type": "agent.skipped", "agentId": "fixer"}
    if reason is not None:
        spec["reason"] = reason
    check(spec, build, verdict, decided_at)
