"""Spec validation: `parse_assertion` accepts every type and explains what is wrong.

Errors are `AssertionParseError`s whose message names the problem, the bad value where there
is one, and the valid choices; `loc` points into the document.
"""

from __future__ import annotations

from typing import Any

import pytest

from evalstream.assertions.evaluation.registry import (
    AssertionParseError,
    builtin_types,
    parse_assertion,
)

JSON = Any

# One minimal valid spec of every built-in type.
VALID: list[dict[str, JSON]] = [
    {"type": "signal.contains", "pattern": "tool:*"},
    {"type": "signal.not", "pattern": "error:**"},
    {"type": "signal.count", "pattern": "tool:call", "min": 1},
    {"type": "signal.trajectory", "patterns": ["a", {"pattern": "b", "payload": {"x": 1}}]},
    {"type": "signal.first", "pattern": "tool:call", "payload": {"name": "Read"}},
    {"type": "signal.last", "pattern": "tool:call"},
    {"type": "snapshot.at", "afterSignal": "plan:done", "path": "plan.steps", "exists": True},
    {"type": "snapshot.final", "path": "files[0].path", "value": {"endsWith": ".py"}},
    {"type": "agent.activated", "agentId": "coder"},
    {"type": "agent.completed", "agentId": "coder"},
    {"type": "agent.causedBy", "agentId": "fixer", "triggerPattern": "review:*"},
    {"type": "agent.emitted", "agentId": "reviewer", "signal": "review:complete"},
    {"type": "agent.skipped", "agentId": "fixer", "reason": "no issues"},
    {"type": "metric.latency.max", "value": 30000},
    {"type": "metric.latency.min", "value": 0},
    {"type": "metric.cost.max", "value": 0.5},
    {"type": "metric.cost.min", "value": 0.01},
    {"type": "metric.tokens.max", "value": 1000, "field": "input"},
    {"type": "metric.tokens.min", "value": 1},
    {"type": "metric.activations", "exact": 4},
    {"type": "output.contains", "text": "injection", "caseSensitive": False},
    {"type": "output.notContains", "text": "password"},
    {"type": "output.matches", "regex": "SQL|prepared", "flags": "i"},
    {"type": "output.json", "schema": {"type": "object", "required": ["a"]}},
    {"type": "output.length", "max": 2000},
    {"type": "tool.called", "name": "Edit", "count": 2},
    {"type": "tool.notCalled", "name": "Bash"},
    {"type": "tool.calledWith", "name": "Read", "args": {"path": {"endsWith": ".py"}}},
    {"type": "tool.sequence", "tools": ["Read", "Edit"]},
    {"type": "llm.judge", "criteria": ["correct"], "minScore": 0.7},
    {"type": "all", "assertions": [{"type": "signal.contains", "pattern": "a"}]},
    {"type": "any", "assertions": [{"type": "signal.contains", "pattern": "a"}]},
    {"type": "not", "assertion": {"type": "signal.contains", "pattern": "a"}},
]


@pytest.mark.parametrize("data", [pytest.param(d, id=str(d["type"])) for d in VALID])
def test_every_type_parses(data: dict[str, JSON]) -> None:
    spec = parse_assertion(data)
    assert spec.type == data["type"]
    wire = spec.wire()
    # fields keep their signal-native spelling (afterSignal, agentId, ...) and their values
    assert {key: wire[key] for key in data} == data
    assert parse_assertion(wire).rule_id() == spec.rule_id()


def test_the_valid_samples_cover_every_builtin_type() -> None:
    assert {d["type"] for d in VALID} == set(builtin_types())


def parse_error(data: JSON, loc: tuple[str | int, ...] = ()) -> AssertionParseError:
    with pytest.raises(AssertionParseError) as info:
        parse_assertion(data, loc)
    return info.value


# --- type and field names --------------------------------------------------------------------


def test_unknown_type_suggests_the_closest() -> None:
    error = parse_error({"type": "signal.contain", "pattern": "x"})
    assert error.loc == ("type",)
    assert "unknown assertion type 'signal.contain'" in error.message
    assert "did you mean 'signal.contains'?" in error.message
    assert "valid types:" in error.message
    assert "tool.calledWith" in error.message


def test_unknown_type_without_a_close_match_lists_the_valid_ones() -> None:
    error = parse_error({"type": "zzzz"})
    assert "did you mean" not in error.message
    assert "valid types: agent.activated" in error.message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param({"pattern": "x"}, "assertion has no `type`", id="missing-type"),
        pytest.param({"type": 3}, "assertion has no `type`", id="type-not-a-string"),
        pytest.param(["signal.contains"], "must be a mapping with a `type`", id="a-list"),
        pytest.param("signal.contains", "got str", id="a-string"),
    ],
)
def test_not_an_assertion(data: JSON, message: str) -> None:
    assert message in parse_error(data).message


def test_unknown_field_suggests_the_closest() -> None:
    error = parse_error({"type": "signal.contains", "pattern": "x", "paylod": {"a": 1}})
    assert error.loc == ("paylod",)
    assert "unknown field 'paylod' for signal.contains" in error.message
    assert "did you mean 'payload'?" in error.message
    assert "valid fields: type, pattern, payload" in error.message


def test_seed_003_spelling_is_required_for_aliased_fields() -> None:
    error = parse_error({"type": "agent.activated", "agentId": "a", "agent_idd": "b"})
    assert "unknown field 'agent_idd'" in error.message
    assert "agentId" in error.message


def test_typo_of_a_required_field_names_the_typo() -> None:
    error = parse_error({"type": "signal.contains", "patern": "tool:*"})
    assert "patern" in error.message
    assert "did you mean 'pattern'?" in error.message


def test_missing_required_field() -> None:
    error = parse_error({"type": "agent.causedBy", "agentId": "fixer"})
    assert error.loc == ("triggerPattern",)
    assert "agent.causedBy needs `triggerPattern`" in error.message


# --- bounds and values -----------------------------------------------------------------------

BOUND_ERRORS = [
    pytest.param(
        {"type": "signal.count", "pattern": "x", "exact": 1, "min": 1},
        "use either `exact`/`count` or `min`/`max`, not both",
        id="signal.count-exact-and-min",
    ),
    pytest.param(
        {"type": "metric.activations", "exact": 1, "max": 3},
        "not both",
        id="metric.activations-exact-and-max",
    ),
    pytest.param(
        {"type": "agent.activated", "agentId": "a", "count": 1, "min": 1},
        "use either `count` or `min`/`max`, not both",
        id="agent.activated-count-and-min",
    ),
    pytest.param(
        {"type": "tool.called", "name": "Edit", "count": 1, "max": 3},
        "use either `count` or `min`/`max`, not both",
        id="tool.called-count-and-max",
    ),
    pytest.param(
        {"type": "signal.count", "pattern": "x", "min": 3, "max": 1},
        "`min` (3) is above `max` (1)",
        id="min-above-max",
    ),
    pytest.param(
        {"type": "signal.count", "pattern": "x", "min": -1},
        "`min` must be >= 0, got -1",
        id="negative-min",
    ),
    pytest.param(
        {"type": "signal.count", "pattern": "x"},
        "signal.count needs `min`, `max` or `exact`",
        id="count-without-bounds",
    ),
    pytest.param(
        {"type": "metric.activations"},
        "metric.activations needs `min`, `max` or `exact`",
        id="activations-without-bounds",
    ),
    pytest.param({"type": "output.length"}, "needs `min` or `max`", id="length-without-bounds"),
    pytest.param(
        {"type": "output.length", "min": 5, "max": 2},
        "`min` (5) is above `max` (2)",
        id="length-min-above-max",
    ),
    pytest.param(
        {"type": "metric.cost.max", "value": -1},
        "greater than or equal to 0 (got -1)",
        id="negative-budget",
    ),
    pytest.param(
        {"type": "metric.tokens.max", "value": 1, "field": "cache"},
        "'input', 'output' or 'total' (got 'cache')",
        id="tokens-bad-field",
    ),
    pytest.param(
        {"type": "llm.judge", "criteria": ["x"], "minScore": 1.5},
        "less than or equal to 1 (got 1.5)",
        id="judge-min-score-above-1",
    ),
    pytest.param(
        {"type": "llm.judge", "criteria": [], "minScore": 0.5},
        "at least 1 item",
        id="judge-without-criteria",
    ),
    pytest.param(
        {"type": "signal.trajectory", "patterns": []},
        "at least 1 item",
        id="empty-trajectory",
    ),
]


@pytest.mark.parametrize(("data", "message"), BOUND_ERRORS)
def test_bounds_are_validated(data: dict[str, JSON], message: str) -> None:
    error = parse_error(data)
    assert error.message.startswith(f"{data['type']}")
    assert message in error.message


# --- regexes, paths, matchers, schemas -------------------------------------------------------

VALUE_ERRORS = [
    pytest.param(
        {"type": "output.matches", "regex": "(unclosed"},
        (),
        "regex '(unclosed' does not compile",
        id="bad-regex",
    ),
    pytest.param(
        {"type": "output.matches", "regex": "a", "flags": "iq"},
        (),
        "unknown regex flag 'q' in 'iq'; valid flags: imsxug",
        id="bad-regex-flag",
    ),
    pytest.param(
        {"type": "snapshot.final", "path": "a..b"},
        (),
        "path 'a..b' has a bad segment ''",
        id="bad-path-empty-segment",
    ),
    pytest.param(
        {"type": "snapshot.at", "afterSignal": "x", "path": "files[first]"},
        (),
        "bad segment 'files[first]'; write e.g. `a.b[0].c`",
        id="bad-path-index",
    ),
    pytest.param(
        {"type": "snapshot.final", "path": ""},
        (),
        "path is empty",
        id="empty-path",
    ),
    pytest.param(
        {"type": "snapshot.final", "path": "a", "exists": False, "value": 1},
        (),
        "`exists: false` cannot be combined with an expected `value`",
        id="exists-false-with-value",
    ),
    pytest.param(
        {"type": "signal.contains", "pattern": "x", "payload": {"n": {"between": [5, 1]}}},
        ("payload",),
        "payload.n: `between` low 5 is above high 1",
        id="between-low-above-high-in-payload",
    ),
    pytest.param(
        {"type": "snapshot.final", "path": "score", "value": {"between": [0.9, 0.1]}},
        (),
        "`between` low 0.9 is above high 0.1",
        id="between-low-above-high-in-snapshot",
    ),
    pytest.param(
        {"type": "tool.calledWith", "name": "Read", "args": {"limit": {"gte": "ten"}}},
        ("args",),
        "args.limit: `gte` takes a number, got 'ten'",
        id="matcher-bad-argument-in-args",
    ),
    pytest.param(
        {"type": "signal.first", "pattern": "x", "payload": {"m": {"matches": "("}}},
        ("payload",),
        "does not compile",
        id="bad-regex-in-a-matcher",
    ),
    pytest.param(
        {"type": "output.json", "schema": {"type": "nosuchtype"}},
        ("schema",),
        "output.json: not a valid JSON Schema",
        id="invalid-json-schema-type",
    ),
    pytest.param(
        {"type": "output.json", "schema": {"required": "a"}},
        ("schema",),
        "not a valid JSON Schema",
        id="invalid-json-schema-required",
    ),
]


@pytest.mark.parametrize(("data", "loc", "message"), VALUE_ERRORS)
def test_values_are_validated(
    data: dict[str, JSON], loc: tuple[str | int, ...], message: str
) -> None:
    error = parse_error(data)
    assert message in error.message
    assert error.loc == loc


TRAJECTORY_STEP_ERRORS = [
    pytest.param(
        {"pattern": "a", "payload": {"x": {"lt": "1"}}}, "`lt` takes a number", id="bad-matcher"
    ),
    pytest.param({"patern": "a"}, "patern", id="unknown-step-field"),
]


@pytest.mark.parametrize(("step", "message"), TRAJECTORY_STEP_ERRORS)
def test_errors_inside_a_trajectory_step_name_the_problem(
    step: dict[str, JSON], message: str
) -> None:
    error = parse_error({"type": "signal.trajectory", "patterns": ["harness:start", step]})
    assert message in error.message
    assert error.loc[:2] == ("patterns", 1)


# --- locations inside compositions -----------------------------------------------------------


def test_errors_inside_all_point_at_the_child() -> None:
    data = {
        "type": "all",
        "assertions": [
            {"type": "signal.contains", "pattern": "x"},
            {"type": "any", "assertions": [{"type": "tool.caled", "name": "Edit"}]},
        ],
    }
    error = parse_error(data, loc=("cases", 2, "assertions", 0))
    assert error.loc == ("cases", 2, "assertions", 0, "assertions", 1, "assertions", 0, "type")
    assert "did you mean 'tool.called'?" in error.message


def test_errors_inside_not_point_at_the_child() -> None:
    error = parse_error({"type": "not", "assertion": {"type": "signal.count", "pattern": "x"}})
    assert error.loc == ("assertion",)
    assert "signal.count needs `min`, `max` or `exact`" in error.message


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"type": "all", "assertions": []}, id="all-empty"),
        pytest.param({"type": "any"}, id="any-missing"),
        pytest.param({"type": "not"}, id="not-missing"),
    ],
)
def test_compositions_need_children(data: dict[str, JSON]) -> None:
    error = parse_error(data)
    assert error.message.startswith(str(data["type"]))
