"""The eval-harness code graders: exact match, regex, structural comparison (pure)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from evalstream.assertions.graders import (
    ExactMatchConfig,
    RegexConfig,
    StructuralConfig,
    compare_structures,
    grade_exact_match,
    grade_regex,
    grade_structural,
)

JSON = Any


# --- exact match -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "output", "expected", "passed"),
    [
        pytest.param({}, "olleh", "olleh", True, id="equal"),
        pytest.param({}, "  olleh\n", "olleh", True, id="trimmed-by-default"),
        pytest.param({"trim_whitespace": False}, " olleh", "olleh", False, id="no-trim"),
        pytest.param({}, "a\r\nb", "a\nb", True, id="crlf-normalised"),
        pytest.param({"normalize_newlines": False}, "a\r\nb", "a\nb", False, id="crlf-kept"),
        pytest.param({}, "Olleh", "olleh", False, id="case-sensitive-by-default"),
        pytest.param({"case_sensitive": False}, "OLLEH", "olleh", True, id="case-insensitive"),
        pytest.param({}, "120", 120, True, id="number-expected-from-text"),
        pytest.param({}, "", "", True, id="empty"),
        pytest.param({}, "olle", "olleh", False, id="different"),
    ],
)
def test_exact_match(config: dict[str, JSON], output: str, expected: JSON, passed: bool) -> None:
    result = grade_exact_match(output, expected, ExactMatchConfig.model_validate(config))
    assert (result.passed, result.score, result.status) == (
        passed,
        1.0 if passed else 0.0,
        "pass" if passed else "fail",
    )


def test_exact_match_alternatives() -> None:
    config = ExactMatchConfig()
    assert grade_exact_match("colour", "color", config, ["colour"]).passed
    assert not grade_exact_match("colr", "color", config, ["colour"]).passed


def test_exact_match_rejects_unknown_options() -> None:
    with pytest.raises(ValidationError, match="ignore_case"):
        ExactMatchConfig.model_validate({"ignore_case": True})


# --- regex ---------------------------------------------------------------------------------


FUNCTION = r"^function\s+(?P<function_name>\w+)\s*\(([^)]*)\)\s*\{"


def test_regex_flags_and_named_and_positional_captures() -> None:
    config = RegexConfig(
        pattern=FUNCTION,
        flags=["multiline", "ignorecase"],
        capture_groups=["function_name", "args"],
    )
    result = grade_regex("// header\nFUNCTION add(a, b) {\n}", config)
    assert result.passed
    assert result.details["captures"] == {"function_name": "add", "args": "a, b"}


def test_regex_without_multiline_does_not_match_a_later_line() -> None:
    result = grade_regex("// header\nfunction add(a) {", RegexConfig(pattern=FUNCTION))
    assert (result.passed, result.details["matched"]) == (False, False)


@pytest.mark.parametrize(
    ("must_match", "text", "passed"),
    [
        (True, "ok 200", True),
        (True, "nope", False),
        (False, "nope", True),
        (False, "ok 200", False),
    ],
)
def test_regex_must_match(must_match: bool, text: str, passed: bool) -> None:
    result = grade_regex(text, RegexConfig(pattern=r"\d{3}", must_match=must_match))
    assert (result.passed, result.score) == (passed, 1.0 if passed else 0.0)


def test_regex_dotall() -> None:
    assert not grade_regex("a\nb", RegexConfig(pattern="a.b")).passed
    assert grade_regex("a\nb", RegexConfig(pattern="a.b", flags=["dotall"])).passed


def test_regex_unknown_flag_names_the_valid_ones() -> None:
    with pytest.raises(ValidationError, match="valid flags: multiline"):
        RegexConfig(pattern="x", flags=["global"])


def test_regex_bad_pattern_is_an_error() -> None:
    result = grade_regex("text", RegexConfig(pattern="(unclosed"))
    assert result.status == "error"
    assert "does not compile" in (result.error or "")


def test_regex_catastrophic_backtracking_is_an_error_not_a_hang() -> None:
    config = RegexConfig(pattern=r"^(a+)+$", timeout_s=0.05)
    result = grade_regex("a" * 5000 + "!", config)
    assert result.status == "error"
    assert "exceeded" in (result.error or "")


# --- structural ------------------------------------------------------------------------------

BASELINE = {
    "status": 200,
    "body": {
        "users": [
            {
                "id": "{{any_uuid}}",
                "name": "{{any_string}}",
                "email": "{{any_email}}",
                "created_at": "{{any_iso_datetime}}",
            }
        ],
        "pagination": {"page": 1, "per_page": 20, "total": "{{any_number}}"},
    },
}


def user(i: int) -> dict[str, JSON]:
    return {
        "id": f"1b4e28ba-2fa1-11d2-883f-0016d3cca42{i}",
        "name": f"user {i}",
        "email": f"u{i}@example.com",
        "created_at": "2024-01-15T10:30:00Z",
    }


def current(**changes: JSON) -> dict[str, JSON]:
    body = {"users": [user(1), user(2)], "pagination": {"page": 1, "per_page": 20, "total": 2}}
    body.update(changes)
    return {"status": 200, "body": body}


SEED_CONFIG = StructuralConfig.model_validate(
    {
        "type": "structural",
        "tolerance": {"allow_additional_fields": True, "allow_field_reordering": True},
        "ignore_fields": ["body.users.*.id", "body.users.*.created_at", "body.pagination.total"],
    }
)


def test_structural_pass_with_placeholders_and_template_list() -> None:
    result = grade_structural(current(), BASELINE, SEED_CONFIG)
    assert result.passed, result.details
    assert result.score == 1.0


def test_structural_additional_fields_allowed_unless_strict() -> None:
    extra = current(cursor="abc")
    assert grade_structural(extra, BASELINE, SEED_CONFIG).passed
    strict = SEED_CONFIG.model_copy(update={"strict": True})
    result = grade_structural(extra, BASELINE, strict)
    assert not result.passed
    assert result.details["differences"][0] == {
        "path": "body.cursor",
        "kind": "unexpected",
        "expected": None,
        "actual": "abc",
    }


def test_structural_reports_missing_type_and_placeholder_differences() -> None:
    broken = current(pagination={"page": "1", "per_page": 20, "total": 2})
    broken["body"]["users"][1]["email"] = "not-an-email"
    del broken["body"]["users"][0]["name"]
    diffs, compared = compare_structures(BASELINE, broken, SEED_CONFIG)
    found = {(d.path, d.kind) for d in diffs}
    assert found == {
        ("body.pagination.page", "type"),
        ("body.users.1.email", "placeholder"),
        ("body.users.0.name", "missing"),
    }
    result = grade_structural(broken, BASELINE, SEED_CONFIG)
    assert result.score == pytest.approx((compared - 3) / compared)


def test_structural_ignore_fields_skip_values_that_would_differ() -> None:
    changed = current()
    changed["body"]["users"][0]["id"] = "not-a-uuid"
    assert grade_structural(changed, BASELINE, SEED_CONFIG).passed
    no_ignore = SEED_CONFIG.model_copy(update={"ignore_fields": []})
    assert not grade_structural(changed, BASELINE, no_ignore).passed


def test_structural_json_form_ignore_values_and_require_keys() -> None:
    config = StructuralConfig.model_validate(
        {
            "method": "structural_match",
            "ignore_values": ["data.*", "meta.total"],
            "require_keys": ["data", "meta.page", "meta.per_page"],
        }
    )
    baseline = {"data": [], "meta": {"page": 1, "per_page": 20}}
    assert grade_structural(
        {"data": [], "meta": {"page": 1, "per_page": 20}}, baseline, config
    ).passed
    missing = grade_structural({"data": [], "meta": {"page": 1}}, baseline, config)
    assert {d["path"] for d in missing.details["differences"]} == {"meta.per_page"}


def test_numeric_tolerance_with_seed_delta_bounds() -> None:
    config = StructuralConfig.model_validate(
        {"type": "numeric", "tolerance": {"quality_scores": {"min_delta": -0.3, "max_delta": None}}}
    )
    baseline = {"quality_scores": {"specificity": 4.2, "tone": 4.6}}
    assert grade_structural(
        {"quality_scores": {"specificity": 4.0, "tone": 4.9}}, baseline, config
    ).passed
    result = grade_structural(
        {"quality_scores": {"specificity": 3.8, "tone": 4.6}}, baseline, config
    )
    assert [d["path"] for d in result.details["differences"]] == ["quality_scores.specificity"]
    assert result.details["differences"][0]["kind"] == "delta"


def test_numeric_abs_and_rel_tolerance() -> None:
    config = StructuralConfig.model_validate({"type": "numeric", "tolerance": {"abs": 0.01}})
    assert grade_structural({"x": 1.005}, {"x": 1.0}, config).passed
    assert not grade_structural({"x": 1.02}, {"x": 1.0}, config).passed


def test_list_reordering() -> None:
    baseline = {"tags": ["a", "b", "c"]}
    assert not grade_structural({"tags": ["c", "a", "b"]}, baseline).passed
    config = StructuralConfig.model_validate({"tolerance": {"allow_list_reordering": True}})
    assert grade_structural({"tags": ["c", "a", "b"]}, baseline, config).passed
    assert not grade_structural({"tags": ["c", "a", "x"]}, baseline, config).passed


def test_exact_type_rejects_extra_fields_and_any_numeric_difference() -> None:
    config = StructuralConfig.model_validate({"type": "exact", "tolerance": {"abs": 1}})
    assert grade_structural({"a": 1}, {"a": 1}, config).passed
    assert not grade_structural({"a": 1, "b": 2}, {"a": 1}, config).passed
    assert not grade_structural({"a": 1.5}, {"a": 1}, config).passed


def test_tolerance_rejects_a_non_mapping_path_bound() -> None:
    with pytest.raises(ValidationError, match="min_delta, max_delta"):
        StructuralConfig.model_validate({"tolerance": {"quality_scores": 0.3}})
