"""Glob patterns over signal names, and time-bounded regular expressions."""

from __future__ import annotations

import pytest

from evalstream.assertions.errors import EvaluationError, RegexTimeoutError
from evalstream.assertions.evaluation.bounded_regex import VALID_FLAGS, BoundedRegex, compile_regex
from evalstream.assertions.wire.patterns import compile_pattern

# --- glob patterns ---------------------------------------------------------------------------

PATTERN_CASES = [
    # no wildcard: literal equality
    pytest.param("tool:call", "tool:call", True, id="literal"),
    pytest.param("tool:call", "tool:calls", False, id="literal-is-not-a-prefix"),
    pytest.param("tool:call", "Tool:Call", False, id="literal-is-case-sensitive"),
    # `*` stays within one `:`-segment, possibly empty
    pytest.param("tool:*", "tool:call", True, id="star-segment"),
    pytest.param("tool:*", "tool:", True, id="star-empty-segment"),
    pytest.param("tool:*", "tool:call:done", False, id="star-does-not-cross-colon"),
    pytest.param("tool:*", "tool", False, id="star-needs-the-colon"),
    pytest.param("*:error", "agent:error", True, id="star-leading"),
    pytest.param("*:error", "a:b:error", False, id="star-leading-one-segment"),
    pytest.param("state:*:changed", "state:plan:changed", True, id="star-middle"),
    pytest.param("state:*:changed", "state:a:b:changed", False, id="star-middle-one-segment"),
    pytest.param("agent:act*", "agent:activated", True, id="star-partial-segment"),
    pytest.param("*", "anything", True, id="star-alone"),
    pytest.param("*", "a:b", False, id="star-alone-one-segment"),
    # `**` matches anything, `:` included
    pytest.param("tool:**", "tool:call:done", True, id="double-star-crosses-colons"),
    pytest.param("tool:**", "tool:", True, id="double-star-empty"),
    pytest.param("**:error", "a:b:error", True, id="double-star-leading"),
    pytest.param("state:**:changed", "state:a:b:changed", True, id="double-star-middle"),
    pytest.param("**", "", True, id="double-star-matches-empty"),
    pytest.param("**", "a:b:c", True, id="double-star-everything"),
    # every other character is literal
    pytest.param("error.*", "error.api", True, id="dot-is-literal"),
    pytest.param("error.*", "errorXapi", False, id="dot-is-not-any-character"),
    pytest.param("error.*", "error.api:x", False, id="dot-star-one-segment"),
    pytest.param("a+b", "a+b", True, id="plus-literal"),
    pytest.param("a+b", "aab", False, id="plus-not-a-quantifier"),
    pytest.param("x(y)?", "x(y)?", True, id="parens-literal"),
    pytest.param("x(y)?", "xy", False, id="parens-not-a-group"),
    pytest.param("v[12]", "v[12]", True, id="brackets-literal"),
    pytest.param("v[12]:*", "v1:x", False, id="brackets-not-a-class"),
    pytest.param("a?c", "abc", False, id="question-mark-literal"),
    pytest.param("^a$", "^a$", True, id="anchors-literal"),
    pytest.param("tool:*", "tool:ca\nll", True, id="newline-within-segment"),
]


@pytest.mark.parametrize(("pattern", "name", "matches"), PATTERN_CASES)
def test_pattern(pattern: str, name: str, matches: bool) -> None:
    assert compile_pattern(pattern).matches(name) is matches


def test_patterns_are_compiled_once() -> None:
    assert compile_pattern("agent:*:x") is compile_pattern("agent:*:x")


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [("tool:call", "tool:call"), ("error.api", "error.api"), ("tool:*", None), ("**", None)],
)
def test_only_patterns_without_stars_are_literal(pattern: str, literal: str | None) -> None:
    assert compile_pattern(pattern).literal == literal


# --- bounded regular expressions -------------------------------------------------------------

FLAG_CASES = [
    pytest.param("abc", "", "xABCx", False, id="no-flags-case-sensitive"),
    pytest.param("abc", "i", "xABCx", True, id="i"),
    pytest.param("^b$", "", "a\nb\nc", False, id="no-flags-anchors-whole-text"),
    pytest.param("^b$", "m", "a\nb\nc", True, id="m"),
    pytest.param("a.c", "", "a\nc", False, id="no-flags-dot-excludes-newline"),
    pytest.param("a.c", "s", "a\nc", True, id="s"),
    pytest.param("a b c  # comment", "x", "abc", True, id="x"),
    pytest.param("abc", "gu", "xabcx", True, id="g-and-u-change-nothing"),
    pytest.param("ABC", "gimsu", "abc", True, id="several"),
]


@pytest.mark.parametrize(("source", "flags", "text", "found"), FLAG_CASES)
def test_bounded_regex_flags(source: str, flags: str, text: str, found: bool) -> None:
    assert BoundedRegex(source, flags).search(text) is found


def test_valid_flags_are_the_javascript_ones() -> None:
    assert sorted(VALID_FLAGS) == sorted("gimsux")


@pytest.mark.parametrize("flags", ["y", "iq", "I", " "])
def test_unknown_flag_is_rejected(flags: str) -> None:
    with pytest.raises(ValueError, match="unknown regex flag") as info:
        BoundedRegex("a", flags)
    assert "valid flags: imsxug" in str(info.value)


@pytest.mark.parametrize("source", ["(", "a{2,1}", "[z-a]", "*a"])
def test_regex_that_does_not_compile_is_rejected(source: str) -> None:
    with pytest.raises(ValueError, match="does not compile"):
        BoundedRegex(source)


def test_compile_regex_is_cached_per_source_and_flags() -> None:
    assert compile_regex("a+b", "i") is compile_regex("a+b", "i")
    assert compile_regex("a+b", "i") is not compile_regex("a+b", "")


def test_pathological_regex_raises_a_timeout_error_instead_of_hanging() -> None:
    # a tiny bound keeps the test fast; (a|aa)+$ on 'aaa...ab' backtracks exponentially
    bomb = BoundedRegex("(a|aa)+$", timeout_s=0.01)
    with pytest.raises(RegexTimeoutError, match=r"exceeded its 0\.01s bound") as info:
        bomb.search("a" * 20_000 + "b")
    assert isinstance(info.value, EvaluationError)  # evaluation errors become `error` verdicts
    assert bomb.search("aaaa") is True  # the same regex is fine on benign input
