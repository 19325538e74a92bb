"""output.contains / notContains / matches / json / length, and where the output comes from.

The output is `harness:end.payload.output` if present, else the last `text:complete`
content, else the last `provider:end` output content; with none, every output.* assertion
fails. Output assertions are decided at close, so `decided_at` is always None. Every case
also runs the reference evaluator and requires the same verdict.
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
    f = SignalFactory()
    return [f(step) if isinstance(step, str) else f(step[0], step[1]) for step in steps]


def ending_with(output: JSON) -> list[Signal]:
    """An episode whose harness:end carries `output`."""
    return episode("harness:start", ("text:complete", {"content": "draft"}), end(output))


def end(output: JSON) -> tuple[str, JSON]:
    return ("harness:end", {"output": output, "durationMs": 5})


def text(content: JSON) -> tuple[str, JSON]:
    return ("text:complete", {"content": content})


def llm(content: JSON) -> tuple[str, JSON]:
    return ("provider:end", {"output": {"content": content, "toolCalls": []}})


def evaluate(spec: dict[str, JSON], signals: list[Signal]) -> AssertionOutcome:
    return evaluate_agreeing(spec, signals)


def check(spec: dict[str, JSON], signals: list[Signal], verdict: str) -> None:
    outcome = evaluate(spec, signals)
    assert outcome.verdict == verdict, outcome.message
    assert outcome.decided_at is None, outcome.message


# --- where the output comes from -------------------------------------------------------------

SOURCE_CASES = [
    pytest.param(
        episode(llm("from-llm"), text("from-text"), end("from-harness")),
        "from-harness",
        id="harness-end-output-first",
    ),
    pytest.param(
        episode(llm("from-llm"), text("from-text"), ("harness:end", {"durationMs": 1})),
        "from-text",
        id="then-text-complete",
    ),
    pytest.param(
        episode(llm("from-llm"), text("from-text"), end(None)),
        "from-text",
        id="null-harness-output-is-no-output",
    ),
    pytest.param(
        episode(text("from-text"), llm("from-llm"), "harness:end"),
        "from-text",
        id="text-complete-wins-even-if-earlier",
    ),
    pytest.param(
        episode(llm("from-llm"), "harness:end"),
        "from-llm",
        id="then-provider-end-content",
    ),
    pytest.param(
        episode(text("first"), text("second-text"), "harness:end"),
        "second-text",
        id="last-text-complete",
    ),
    pytest.param(
        episode(llm("first"), llm("second-llm")),
        "second-llm",
        id="last-provider-end",
    ),
    pytest.param(
        episode(end("first"), end("second-end")),
        "second-end",
        id="last-harness-end",
    ),
    pytest.param(
        episode(text([{"type": "text", "text": "block-"}, {"type": "text", "text": "joined"}])),
        "block-joined",
        id="content-blocks-joined",
    ),
    pytest.param(
        episode(("provider:end", {"output": "plain-string-output"})),
        "plain-string-output",
        id="provider-output-as-a-string",
    ),
    pytest.param(
        episode(end({"answer": "json-output"})),
        '"answer":"json-output"',
        id="harness-output-object-serialised",
    ),
]


@pytest.mark.parametrize(("signals", "expected"), SOURCE_CASES)
def test_output_source_precedence(signals: list[Signal], expected: str) -> None:
    check({"type": "output.contains", "text": expected}, signals, "pass")
    # the output is exactly that one source: nothing of the others leaks in
    check({"type": "output.length", "max": len(expected) + 2}, signals, "pass")


NO_OUTPUT = episode(
    "harness:start",
    ("provider:end", {"output": {"toolCalls": [{"name": "Edit"}]}}),
    ("text:delta", {"content": "partial"}),
    ("harness:end", {"durationMs": 3}),
)

EVERY_OUTPUT_TYPE: list[dict[str, JSON]] = [
    {"type": "output.contains", "text": "x"},
    {"type": "output.notContains", "text": "x"},
    {"type": "output.matches", "regex": ".*"},
    {"type": "output.json", "schema": {}},
    {"type": "output.length", "min": 0},
]


@pytest.mark.parametrize("spec", [pytest.param(s, id=str(s["type"])) for s in EVERY_OUTPUT_TYPE])
@pytest.mark.parametrize(
    "signals", [pytest.param(NO_OUTPUT, id="no-output"), pytest.param([], id="empty")]
)
def test_no_output_fails_every_output_assertion(
    spec: dict[str, JSON], signals: list[Signal]
) -> None:
    outcome = evaluate(spec, signals)
    assert outcome.verdict == "fail"
    assert "no output" in outcome.message


EMPTY_HARNESS_OUTPUT_CASES = [
    pytest.param({"type": "output.length", "max": 0}, "pass", id="length"),
    pytest.param({"type": "output.matches", "regex": "^$"}, "pass", id="matches"),
    pytest.param({"type": "output.notContains", "text": "draft"}, "pass", id="notContains"),
    pytest.param({"type": "output.contains", "text": "draft"}, "fail", id="contains"),
    pytest.param({"type": "output.json", "schema": {}}, "fail", id="json"),
]


@pytest.mark.parametrize(("spec", "verdict"), EMPTY_HARNESS_OUTPUT_CASES)
def test_empty_harness_output_is_an_output(spec: dict[str, JSON], verdict: str) -> None:
    # "" is present (not null): it wins over the earlier text:complete and is judged as text
    check(spec, episode(text("draft"), end("")), verdict)


# --- output.contains / notContains -----------------------------------------------------------

REPORT = ending_with("Found a SQL Injection in getUser()")

CONTAINS_CASES = [
    pytest.param("output.contains", "SQL Injection", None, "pass", id="contains"),
    pytest.param("output.contains", "sql injection", None, "fail", id="case-sensitive-default"),
    pytest.param("output.contains", "sql injection", True, "fail", id="case-sensitive-explicit"),
    pytest.param("output.contains", "sql injection", False, "pass", id="case-insensitive"),
    pytest.param("output.contains", "XSS", False, "fail", id="absent"),
    pytest.param("output.contains", "draft", None, "fail", id="only-the-chosen-source-counts"),
    pytest.param("output.notContains", "password", None, "pass", id="not-absent"),
    pytest.param("output.notContains", "Injection", None, "fail", id="not-present"),
    pytest.param("output.notContains", "injection", None, "pass", id="not-case-sensitive"),
    pytest.param("output.notContains", "injection", False, "fail", id="not-case-insensitive"),
]


@pytest.mark.parametrize(("kind", "needle", "case_sensitive", "verdict"), CONTAINS_CASES)
def test_output_contains_and_not_contains(
    kind: str, needle: str, case_sensitive: bool | None, verdict: str
) -> None:
    spec: dict[str, JSON] = {"type": kind, "text": needle}
    if case_sensitive is not None:
        spec["caseSensitive"] = case_sensitive
    check(spec, REPORT, verdict)


def test_output_contains_case_insensitive_uses_casefold() -> None:
    check(
        {"type": "output.contains", "text": "STRASSE", "caseSensitive": False},
        ending_with("die Straße"),
        "pass",
    )


# --- output.matches --------------------------------------------------------------------------

MULTILINE = ending_with("Summary:\nSQL injection found\nseverity: HIGH")

MATCHES_CASES = [
    pytest.param("SQL|parameterized", "", "pass", id="search-not-fullmatch"),
    pytest.param("sql injection", "", "fail", id="case-sensitive-without-flag"),
    pytest.param("sql injection", "i", "pass", id="flag-i"),
    pytest.param("^SQL", "", "fail", id="caret-is-start-of-text"),
    pytest.param("^SQL", "m", "pass", id="flag-m"),
    pytest.param("Summary:.SQL", "", "fail", id="dot-excludes-newline"),
    pytest.param("Summary:.SQL", "s", "pass", id="flag-s"),
    pytest.param("severity: \\s* (LOW|HIGH)", "x", "pass", id="flag-x"),
    pytest.param("severity: high$", "gmiu", "pass", id="flags-combined"),
    pytest.param("\\bHIGH\\b", "", "pass", id="word-boundary"),
    pytest.param("CRITICAL", "i", "fail", id="absent"),
]


@pytest.mark.parametrize(("regex", "flags", "verdict"), MATCHES_CASES)
def test_output_matches(regex: str, flags: str, verdict: str) -> None:
    check({"type": "output.matches", "regex": regex, "flags": flags}, MULTILINE, verdict)


def test_pathological_regex_is_an_error_not_a_hang() -> None:
    # (a|aa)+$ backtracks exponentially on 'aaa...ab'; the bound turns it into `error`
    signals = ending_with("a" * 20_000 + "b")
    outcome = evaluate({"type": "output.matches", "regex": "(a|aa)+$"}, signals)
    assert (outcome.verdict, outcome.decided_at) == ("error", None)
    assert "RegexTimeoutError" in outcome.message


# --- output.json -----------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "required": ["verdict", "score"],
    "properties": {
        "verdict": {"enum": ["approve", "reject"]},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
    },
}

JSON_CASES = [
    pytest.param('{"verdict": "approve", "score": 0.9}', "pass", id="valid"),
    pytest.param('{"verdict": "approve", "score": 0.9, "extra": 1}', "pass", id="extra-keys"),
    pytest.param('{"verdict": "maybe", "score": 0.9}', "fail", id="schema-violation"),
    pytest.param('{"verdict": "approve"}', "fail", id="required-missing"),
    pytest.param('{"verdict": "approve", "score": 0.9', "fail", id="not-json"),
    pytest.param("approve with score 0.9", "fail", id="prose"),
    pytest.param("[1, 2]", "fail", id="json-of-the-wrong-type"),
    pytest.param(
        'Here you go:\n```json\n{"verdict": "reject", "score": 0.1}\n```\nThanks.',
        "pass",
        id="fenced-json-block",
    ),
    pytest.param(
        'Result:\n```\n{"verdict": "reject", "score": 0.1}\n```',
        "pass",
        id="fenced-block-without-language",
    ),
    pytest.param(
        'Result:\n```json\n{"verdict": "reject", "score": 7}\n```',
        "fail",
        id="fenced-json-violating-schema",
    ),
    pytest.param("```json\n{not json}\n```", "fail", id="fenced-invalid-json"),
    pytest.param({"verdict": "approve", "score": 1}, "pass", id="harness-output-object"),
]


@pytest.mark.parametrize(("output", "verdict"), JSON_CASES)
def test_output_json(output: JSON, verdict: str) -> None:
    check({"type": "output.json", "schema": SCHEMA}, ending_with(output), verdict)


def test_output_json_finds_a_json_block_after_another_fenced_block() -> None:
    output = (
        "The fix:\n```python\nquery = 'SELECT 1'\n```\n"
        'Result:\n```json\n{"verdict": "approve", "score": 0.8}\n```\n'
    )
    check({"type": "output.json", "schema": SCHEMA}, ending_with(output), "pass")


def test_output_json_failure_names_the_invalid_location() -> None:
    outcome = evaluate(
        {"type": "output.json", "schema": SCHEMA},
        ending_with('{"verdict": "approve", "score": 3}'),
    )
    assert outcome.verdict == "fail"
    assert "score" in outcome.message


# --- output.length ---------------------------------------------------------------------------

LENGTH_CASES = [
    pytest.param({"min": 10}, "pass", id="min-equal"),
    pytest.param({"min": 11}, "fail", id="min-above"),
    pytest.param({"max": 10}, "pass", id="max-equal"),
    pytest.param({"max": 9}, "fail", id="max-below"),
    pytest.param({"min": 5, "max": 20}, "pass", id="within"),
    pytest.param({"min": 0, "max": 0}, "fail", id="zero-range"),
]


@pytest.mark.parametrize(("bounds", "verdict"), LENGTH_CASES)
def test_output_length(bounds: dict[str, JSON], verdict: str) -> None:
    check({"type": "output.length", **bounds}, ending_with("0123456789"), verdict)


def test_output_length_counts_characters_not_bytes() -> None:
    check({"type": "output.length", "max": 3}, ending_with("ééé"), "pass")
