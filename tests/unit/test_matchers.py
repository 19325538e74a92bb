"""Value matchers, payload partial matching and state paths
(`evalstream.assertions.evaluation.matchers`)."""

from __future__ import annotations

from typing import Any

import pytest

from evalstream.assertions.evaluation.matchers import (
    MATCHER_KEYS,
    compile_expected,
    is_value_matcher,
    json_equal,
    parse_path,
    resolve_path,
)

JSON = Any

# --- JSON equality ---------------------------------------------------------------------------

EQUALITY_CASES = [
    pytest.param(1, 1, True, id="int-int"),
    pytest.param(1, 1.0, True, id="int-float"),
    pytest.param(0, -0.0, True, id="zero-negative-zero"),
    pytest.param(True, 1, False, id="true-is-not-1"),
    pytest.param(1, True, False, id="1-is-not-true"),
    pytest.param(False, 0, False, id="false-is-not-0"),
    pytest.param(True, True, True, id="true-true"),
    pytest.param(False, True, False, id="false-true"),
    pytest.param("1", 1, False, id="string-is-not-number"),
    pytest.param("a", "a", True, id="string-string"),
    pytest.param(None, None, True, id="null-null"),
    pytest.param(None, 0, False, id="null-is-not-0"),
    pytest.param(None, "", False, id="null-is-not-empty-string"),
    pytest.param([1, 2], [1.0, 2], True, id="list-numbers"),
    pytest.param([1, 2], [2, 1], False, id="list-order-matters"),
    pytest.param([1], [1, 1], False, id="list-length"),
    pytest.param({"a": 1}, {"a": 1.0}, True, id="object-numbers"),
    pytest.param({"a": 1}, {"a": 1, "b": 2}, False, id="object-extra-key"),
    pytest.param({"a": True}, {"a": 1}, False, id="object-nested-bool"),
    pytest.param([], {}, False, id="list-is-not-object"),
]


@pytest.mark.parametrize(("a", "b", "equal"), EQUALITY_CASES)
def test_json_equal(a: JSON, b: JSON, equal: bool) -> None:
    assert json_equal(a, b) is equal
    assert json_equal(b, a) is equal


@pytest.mark.parametrize(("expected", "actual", "matches"), EQUALITY_CASES)
def test_scalars_and_whole_values_compare_with_json_equality(
    expected: JSON, actual: JSON, matches: bool
) -> None:
    if isinstance(expected, dict) and isinstance(actual, dict) and expected.keys() < actual.keys():
        matches = True  # objects match partially: extra actual keys are ignored
    assert compile_expected(expected)(actual) is matches


# --- partial objects and lists ---------------------------------------------------------------

ACTUAL = {
    "name": "Edit",
    "input": {"path": "src/a.py", "lines": [3, 4], "flags": {"dry": False}},
    "files": [{"path": "a.py", "size": 10}, {"path": "b.py", "size": 20}],
    "note": None,
}

STRUCTURE_CASES = [
    pytest.param({}, True, id="empty-object-matches-any-object"),
    pytest.param({"name": "Edit"}, True, id="one-key"),
    pytest.param({"name": "Read"}, False, id="one-key-differs"),
    pytest.param({"input": {"path": "src/a.py"}}, True, id="nested-partial"),
    pytest.param({"input": {"flags": {"dry": False}}}, True, id="deeply-nested"),
    pytest.param({"input": {"flags": {"dry": 0}}}, False, id="false-is-not-0"),
    pytest.param({"input": {"path": "src/a.py", "missing": 1}}, False, id="missing-key"),
    pytest.param({"note": None}, True, id="null-value-present"),
    pytest.param({"absent": None}, False, id="null-does-not-match-missing"),
    pytest.param({"input": {"lines": [3, 4]}}, True, id="list-equal"),
    pytest.param({"input": {"lines": [3]}}, False, id="list-shorter"),
    pytest.param({"input": {"lines": [3, 4, 5]}}, False, id="list-longer"),
    pytest.param({"input": {"lines": [4, 3]}}, False, id="list-order"),
    pytest.param({"files": [{"path": "a.py"}, {"path": "b.py"}]}, True, id="list-of-partials"),
    pytest.param({"files": [{"path": "a.py"}]}, False, id="list-of-partials-too-short"),
    pytest.param({"files": [{}, {"size": {"gt": 15}}]}, True, id="matcher-inside-list"),
    pytest.param({"files": [{}, {"size": {"gt": 25}}]}, False, id="matcher-inside-list-fails"),
    pytest.param({"input": {"lines": {"contains": 4}}}, True, id="matcher-on-list"),
    pytest.param({"name": {"startsWith": "Ed"}, "note": None}, True, id="matcher-and-value"),
    pytest.param({"input": "src/a.py"}, False, id="object-vs-string"),
    pytest.param({"name": {"path": "x"}}, False, id="object-expected-on-string"),
]


@pytest.mark.parametrize(("expected", "matches"), STRUCTURE_CASES)
def test_partial_objects_and_equal_length_lists(expected: JSON, matches: bool) -> None:
    assert compile_expected(expected)(ACTUAL) is matches


@pytest.mark.parametrize("actual", [None, "Edit", 3, [ACTUAL]], ids=["null", "str", "int", "list"])
def test_an_object_never_matches_a_non_object(actual: JSON) -> None:
    assert compile_expected({})(actual) is False


# --- value matchers --------------------------------------------------------------------------

MATCHER_CASES = [
    # gte / lte / gt / lt
    pytest.param({"gte": 3}, 3, True, id="gte-equal"),
    pytest.param({"gte": 3}, 2.5, False, id="gte-below"),
    pytest.param({"gte": 0.5}, 1, True, id="gte-int-vs-float"),
    pytest.param({"lte": 3}, 3.0, True, id="lte-equal"),
    pytest.param({"lte": 3}, 4, False, id="lte-above"),
    pytest.param({"gt": 3}, 3, False, id="gt-equal"),
    pytest.param({"gt": 3}, 3.01, True, id="gt-above"),
    pytest.param({"lt": 3}, 3, False, id="lt-equal"),
    pytest.param({"lt": 3}, -1, True, id="lt-below"),
    pytest.param({"gte": 0}, "5", False, id="gte-string-is-not-a-number"),
    pytest.param({"gte": 0}, True, False, id="gte-bool-is-not-a-number"),
    pytest.param({"lt": 10}, None, False, id="lt-null"),
    # between (inclusive)
    pytest.param({"between": [1, 5]}, 1, True, id="between-low-edge"),
    pytest.param({"between": [1, 5]}, 5, True, id="between-high-edge"),
    pytest.param({"between": [1, 5]}, 3.5, True, id="between-inside"),
    pytest.param({"between": [1, 5]}, 0.99, False, id="between-below"),
    pytest.param({"between": [1, 5]}, 5.01, False, id="between-above"),
    pytest.param({"between": [2, 2]}, 2, True, id="between-point"),
    pytest.param({"between": [0, 1]}, False, False, id="between-bool"),
    # contains: substring or list membership
    pytest.param({"contains": "inject"}, "SQL injection", True, id="contains-substring"),
    pytest.param({"contains": "Inject"}, "SQL injection", False, id="contains-case-sensitive"),
    pytest.param({"contains": ""}, "anything", True, id="contains-empty-string"),
    pytest.param({"contains": "sql"}, ["sql", "xss"], True, id="contains-list-member"),
    pytest.param({"contains": "sq"}, ["sql", "xss"], False, id="contains-list-no-substring"),
    pytest.param({"contains": 2}, [1, 2.0, 3], True, id="contains-number-json-equal"),
    pytest.param({"contains": True}, [1, 2], False, id="contains-true-not-1"),
    pytest.param({"contains": {"a": 1}}, [{"a": 1}], True, id="contains-object-member"),
    pytest.param({"contains": {"a": 1}}, [{"a": 1, "b": 2}], False, id="contains-object-exact"),
    pytest.param({"contains": 1}, "a1b", False, id="contains-number-in-string"),
    pytest.param({"contains": "a"}, {"a": 1}, False, id="contains-on-object"),
    pytest.param({"contains": "a"}, None, False, id="contains-on-null"),
    # startsWith / endsWith
    pytest.param({"startsWith": "src/"}, "src/a.py", True, id="startsWith"),
    pytest.param({"startsWith": "src/"}, "lib/src/a.py", False, id="startsWith-not-prefix"),
    pytest.param({"startsWith": "1"}, 123, False, id="startsWith-number"),
    pytest.param({"endsWith": ".py"}, "src/a.py", True, id="endsWith"),
    pytest.param({"endsWith": ".py"}, "a.pyc", False, id="endsWith-not-suffix"),
    pytest.param({"endsWith": "x"}, ["x"], False, id="endsWith-list"),
    # matches: a regex search
    pytest.param({"matches": "^git (status|diff)"}, "git status -s", True, id="matches-anchored"),
    pytest.param({"matches": "status"}, "git status -s", True, id="matches-searches"),
    pytest.param({"matches": "^status"}, "git status", False, id="matches-no-match"),
    pytest.param({"matches": "GIT"}, "git", False, id="matches-case-sensitive"),
    pytest.param({"matches": "(?i)GIT"}, "git", True, id="matches-inline-flag"),
    pytest.param({"matches": "1"}, 1, False, id="matches-number"),
]


@pytest.mark.parametrize(("matcher", "actual", "matches"), MATCHER_CASES)
def test_value_matcher(matcher: dict[str, JSON], actual: JSON, matches: bool) -> None:
    assert compile_expected(matcher)(actual) is matches


def test_every_matcher_key_is_covered() -> None:
    covered = {next(iter(p.values[0])) for p in MATCHER_CASES}  # type: ignore[call-overload]
    assert covered == set(MATCHER_KEYS)
    assert set(MATCHER_KEYS) == {
        "gte",
        "lte",
        "gt",
        "lt",
        "between",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
    }


@pytest.mark.parametrize(
    ("expected", "is_matcher"),
    [
        pytest.param({"gte": 1}, True, id="one-matcher-key"),
        pytest.param({"gte": 1, "lte": 5}, False, id="two-keys-is-an-object"),
        pytest.param({"name": 1}, False, id="other-key"),
        pytest.param({}, False, id="empty"),
        pytest.param("gte", False, id="string"),
    ],
)
def test_is_value_matcher(expected: JSON, is_matcher: bool) -> None:
    assert is_value_matcher(expected) is is_matcher


def test_two_matcher_keys_form_a_partial_object_not_a_range() -> None:
    # A value matcher has exactly one key; anything else is matched as a (partial) object.
    pred = compile_expected({"gte": 1, "lte": 5})
    assert pred(3) is False
    assert pred({"gte": 1, "lte": 5, "other": 0}) is True


BAD_MATCHERS = [
    pytest.param({"gte": "3"}, "`gte` takes a number", id="gte-string"),
    pytest.param({"lt": True}, "`lt` takes a number", id="lt-bool"),
    pytest.param({"between": [1]}, "`between` takes [low, high]", id="between-one-number"),
    pytest.param({"between": [1, "5"]}, "`between` takes [low, high]", id="between-string"),
    pytest.param({"between": 3}, "`between` takes [low, high]", id="between-scalar"),
    pytest.param({"between": [5, 1]}, "low 5 is above high 1", id="between-low-above-high"),
    pytest.param({"startsWith": 1}, "`startsWith` takes a string", id="startsWith-number"),
    pytest.param({"endsWith": None}, "`endsWith` takes a string", id="endsWith-null"),
    pytest.param({"matches": 1}, "`matches` takes a regex string", id="matches-number"),
    pytest.param(
        {"matches": "("},
        "does not compile",
        id="matches-bad-regex",
    ),
]


@pytest.mark.parametrize(("matcher", "message"), BAD_MATCHERS)
def test_bad_matcher_arguments_are_rejected_at_compile_time(
    matcher: dict[str, JSON], message: str
) -> None:
    with pytest.raises(ValueError, match=r"^args\.limit: ") as info:
        compile_expected({"limit": matcher}, "args")
    assert message in str(info.value)


def test_bad_matcher_error_names_its_location_in_lists() -> None:
    with pytest.raises(ValueError, match=r"payload\.files\[1\]\.size: `gt` takes a number"):
        compile_expected({"files": [{}, {"size": {"gt": "big"}}]}, "payload")


# --- state paths -----------------------------------------------------------------------------

PATH_CASES = [
    pytest.param("a", ("a",), id="one-key"),
    pytest.param("analysis.confidence", ("analysis", "confidence"), id="dotted"),
    pytest.param("files[0].path", ("files", 0, "path"), id="index"),
    pytest.param("grid[1][2]", ("grid", 1, 2), id="two-indices"),
    pytest.param("a.b[10].c", ("a", "b", 10, "c"), id="index-in-the-middle"),
    pytest.param("my key.x-y", ("my key", "x-y"), id="other-characters-literal"),
]


@pytest.mark.parametrize(("path", "parts"), PATH_CASES)
def test_parse_path(path: str, parts: tuple[str | int, ...]) -> None:
    assert parse_path(path) == parts


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a.", "a[x]", "a[-1]", "a[1", "a]1[", "a[1]b"])
def test_parse_path_rejects_bad_paths(path: str) -> None:
    with pytest.raises(ValueError, match="path"):
        parse_path(path)


STATE = {"plan": {"steps": ["read", "edit"], "done": False}, "n": 0, "empty": None}

RESOLVE_CASES = [
    pytest.param("plan.steps[1]", (True, "edit"), id="index"),
    pytest.param("plan.done", (True, False), id="false-value-found"),
    pytest.param("n", (True, 0), id="zero-value-found"),
    pytest.param("empty", (True, None), id="null-value-found"),
    pytest.param("plan.steps[2]", (False, None), id="index-out-of-range"),
    pytest.param("plan.missing", (False, None), id="missing-key"),
    pytest.param("plan.steps.x", (False, None), id="key-on-a-list"),
    pytest.param("plan[0]", (False, None), id="index-on-an-object"),
    pytest.param("n.x", (False, None), id="key-on-a-number"),
    pytest.param("empty.x", (False, None), id="key-on-null"),
]


@pytest.mark.parametrize(("path", "result"), RESOLVE_CASES)
def test_resolve_path(path: str, result: tuple[bool, JSON]) -> None:
    assert resolve_path(STATE, parse_path(path)) == result
