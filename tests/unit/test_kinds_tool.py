"""tool.called / notCalled / calledWith / sequence over `tool:call {id, name, input}`.

Every case also runs the reference evaluator and requires the same verdict. `calls()` builds
harness:start followed by one tool:call per entry, so the calls have ids s2, s3, ...;
`decided_at=None` means decided when the episode closed.
"""

from __future__ import annotations

from typing import Any

import pytest

from evalstream.assertions.evaluation.engine import AssertionOutcome
from evalstream.assertions.testing import SignalFactory, evaluate_agreeing
from evalstream.assertions.wire.signals import Signal

JSON = Any
Call = str | tuple[str, JSON]


def calls(*entries: Call) -> list[Signal]:
    """harness:start, then one tool:call per entry: a name, or (name, input)."""
    f = SignalFactory()
    out = [f("harness:start")]
    for i, entry in enumerate(entries):
        name, args = (entry, {}) if isinstance(entry, str) else entry
        out.append(f("tool:call", {"id": f"t{i}", "name": name, "input": args}))
    return out


def evaluate(spec: dict[str, JSON], signals: list[Signal]) -> AssertionOutcome:
    return evaluate_agreeing(spec, signals)


def check(
    spec: dict[str, JSON], signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    outcome = evaluate(spec, signals)
    assert outcome.verdict == verdict, outcome.message
    assert outcome.decided_at == decided_at, outcome.message


# --- tool.called -----------------------------------------------------------------------------

CALLED_CASES = [
    pytest.param("Edit", {}, calls("Read", "Edit"), "pass", "s3", id="default-at-least-once"),
    pytest.param("Edit", {}, calls("Read", "Bash"), "fail", None, id="never-called"),
    pytest.param("Edit", {}, calls("EditFile"), "fail", None, id="literal-name-no-prefix-match"),
    pytest.param(
        "mcp__github__*",
        {},
        calls("Read", "mcp__github__create_pr"),
        "pass",
        "s3",
        id="glob-name",
    ),
    pytest.param("Edit", {"count": 2}, calls("Edit", "Edit"), "pass", None, id="count-met"),
    pytest.param("Edit", {"count": 2}, calls("Edit"), "fail", None, id="count-short"),
    pytest.param(
        "Edit",
        {"count": 2},
        calls("Edit", "Read", "Edit", "Edit"),
        "fail",
        "s5",
        id="count-exceeded-fails-at-once",
    ),
    pytest.param("Edit", {"count": 0}, calls("Read"), "pass", None, id="count-zero"),
    pytest.param("Edit", {"count": 0}, calls("Edit"), "fail", "s2", id="count-zero-violated"),
    pytest.param("Edit", {"min": 2}, calls("Edit", "Read", "Edit"), "pass", "s4", id="min-reached"),
    pytest.param("Edit", {"max": 1}, calls("Edit", "Edit"), "fail", "s3", id="max-exceeded"),
    pytest.param("Edit", {"max": 1}, calls(), "pass", None, id="max-allows-zero"),
    pytest.param("Edit", {"min": 1, "max": 2}, calls("Edit", "Edit"), "pass", None, id="range"),
]


@pytest.mark.parametrize(("name", "bounds", "signals", "verdict", "decided_at"), CALLED_CASES)
def test_tool_called(
    name: str, bounds: dict[str, JSON], signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    check({"type": "tool.called", "name": name, **bounds}, signals, verdict, decided_at)


def test_tool_called_reads_the_name_from_the_payload_only() -> None:
    f = SignalFactory()
    signals = [f("tool:call", {"tool": "Edit"}, agent="Edit"), f("tool:Edit", {"name": "Edit"})]
    check({"type": "tool.called", "name": "Edit"}, signals, "fail", None)


# --- tool.notCalled --------------------------------------------------------------------------

NOT_CALLED_CASES = [
    pytest.param("Bash", calls("Read", "Edit"), "pass", None, id="never-called"),
    pytest.param("Bash", calls("Read", "Bash", "Edit"), "fail", "s3", id="called-fails-at-once"),
    pytest.param("mcp__*", calls("Read", "mcp__fs__write"), "fail", "s3", id="glob"),
    pytest.param("Bash", calls(), "pass", None, id="no-calls"),
]


@pytest.mark.parametrize(("name", "signals", "verdict", "decided_at"), NOT_CALLED_CASES)
def test_tool_not_called(
    name: str, signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    check({"type": "tool.notCalled", "name": name}, signals, verdict, decided_at)


# --- tool.calledWith -------------------------------------------------------------------------

EDITS = calls(
    ("Read", {"path": "src/app.py"}),  # s2
    ("Edit", {"path": "README.md", "old": "a", "new": "b"}),  # s3
    ("Edit", {"path": "src/app.py", "old": "x", "new": "y", "lines": [3, 4]}),  # s4
    ("Bash", {"command": "git status --short", "timeout": 30}),  # s5
)

CALLED_WITH_CASES = [
    pytest.param("Edit", {"path": "src/app.py"}, "pass", "s4", id="partial-args"),
    pytest.param("Edit", {"path": "src/app.py", "new": "y"}, "pass", "s4", id="several-keys"),
    pytest.param("Edit", {"path": "src/app.py", "new": "z"}, "fail", None, id="one-key-differs"),
    pytest.param("Edit", {"path": "docs/x.md"}, "fail", None, id="no-such-call"),
    pytest.param("Bash", {"path": "src/app.py"}, "fail", None, id="args-of-another-tool"),
    pytest.param("Edit", {"path": {"endsWith": ".py"}}, "pass", "s4", id="endsWith"),
    pytest.param("Edit", {"path": {"startsWith": "README"}}, "pass", "s3", id="startsWith"),
    pytest.param("Bash", {"command": {"matches": "^git "}}, "pass", "s5", id="matches"),
    pytest.param("Bash", {"command": {"contains": "status"}}, "pass", "s5", id="contains"),
    pytest.param("Bash", {"timeout": {"lte": 30}}, "pass", "s5", id="lte"),
    pytest.param("Bash", {"timeout": {"lt": 30}}, "fail", None, id="lt"),
    pytest.param("Bash", {"timeout": {"between": [10, 60]}}, "pass", "s5", id="between"),
    pytest.param("Edit", {"lines": [3, 4]}, "pass", "s4", id="list-equal"),
    pytest.param("Edit", {"lines": [3]}, "fail", None, id="list-length-differs"),
    pytest.param("Edit", {"lines": {"contains": 4}}, "pass", "s4", id="list-contains"),
    pytest.param("*", {"path": "README.md"}, "pass", "s3", id="glob-name"),
    pytest.param("Edit", {"missing": None}, "fail", None, id="missing-key-is-not-null"),
]


@pytest.mark.parametrize(("name", "args", "verdict", "decided_at"), CALLED_WITH_CASES)
def test_tool_called_with(
    name: str, args: dict[str, JSON], verdict: str, decided_at: str | None
) -> None:
    check({"type": "tool.calledWith", "name": name, "args": args}, EDITS, verdict, decided_at)


@pytest.mark.parametrize("key", ["input", "args", "arguments"])
def test_tool_called_with_reads_input_args_or_arguments(key: str) -> None:
    f = SignalFactory()
    signals = [f("tool:call", {"name": "Read", key: {"path": "a.py"}})]
    spec = {"type": "tool.calledWith", "name": "Read", "args": {"path": "a.py"}}
    check(spec, signals, "pass", "s1")


def test_tool_called_with_input_that_is_not_an_object() -> None:
    f = SignalFactory()
    signals = [f("tool:call", {"name": "Bash", "input": "ls -la"})]
    spec = {"type": "tool.calledWith", "name": "Bash", "args": {"command": "ls -la"}}
    check(spec, signals, "fail", None)


# --- tool.sequence ---------------------------------------------------------------------------

SEQUENCE_CASES = [
    pytest.param(["Read", "Edit"], calls("Read", "Bash", "Edit"), "pass", "s4", id="subsequence"),
    pytest.param(["Read", "Edit"], calls("Edit", "Read"), "fail", None, id="wrong-order"),
    pytest.param(["Read", "Edit", "Bash"], calls("Read", "Edit"), "fail", None, id="missing"),
    pytest.param(["Read", "Read"], calls("Read", "Edit"), "fail", None, id="repeat-needs-two"),
    pytest.param(["Read", "Read"], calls("Read", "Edit", "Read"), "pass", "s4", id="repeat"),
    pytest.param(["Read", "mcp__*"], calls("Read", "mcp__gh__pr"), "pass", "s3", id="glob-names"),
    pytest.param(
        ["Edit", "Bash"],
        calls("Bash", "Edit", "Read", "Bash"),
        "pass",
        "s5",
        id="earlier-out-of-order-calls-ignored",
    ),
    pytest.param(["Read"], calls(), "fail", None, id="no-calls"),
]


@pytest.mark.parametrize(("tools", "signals", "verdict", "decided_at"), SEQUENCE_CASES)
def test_tool_sequence(
    tools: list[str], signals: list[Signal], verdict: str, decided_at: str | None
) -> None:
    check({"type": "tool.sequence", "tools": tools}, signals, verdict, decided_at)
