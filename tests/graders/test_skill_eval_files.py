"""The skill-eval files: load, validate (the seed's rules), derive and round-trip."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evalstream.assertions.skill_evals.models import (
    AnalysisFile,
    ComparisonFile,
    CriterionResult,
    EvalsFile,
    GradingFile,
    HistoryFile,
    SeedFile,
    Suggestion,
    analysis_from,
    blind_pair,
    build_grading,
    load,
)

JSON = Any
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "skill-evals"
FILES: dict[str, type[SeedFile]] = {
    "evals.json": EvalsFile,
    "grading.json": GradingFile,
    "history.json": HistoryFile,
    "comparison.json": ComparisonFile,
    "analysis.json": AnalysisFile,
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_examples_load_and_round_trip(name: str) -> None:
    model = FILES[name]
    loaded = load(model, EXAMPLES / name)
    text = loaded.dump()
    assert json.loads(text) == json.loads((EXAMPLES / name).read_text())
    assert model.model_validate_json(text) == loaded


def evals(**case_changes: JSON) -> dict[str, JSON]:
    data: dict[str, JSON] = json.loads((EXAMPLES / "evals.json").read_text())
    data["cases"][0].update(case_changes)
    return data


def test_a_case_without_a_required_expectation_is_rejected() -> None:
    optional = [{"criterion": "style", "description": "Uses headings", "required": False}]
    with pytest.raises(ValidationError, match="could never fail"):
        EvalsFile.model_validate(evals(expectations=optional))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"id": "Case 01"}, "kebab-case", id="id-not-kebab"),
        pytest.param({"expectations": []}, "at least 1", id="no-expectations"),
        pytest.param({"prompt": ""}, "at least 1 character", id="empty-prompt"),
    ],
)
def test_case_rules(changes: dict[str, JSON], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        EvalsFile.model_validate(evals(**changes))


def test_case_ids_are_unique() -> None:
    data = evals()
    data["cases"].append(data["cases"][0])
    with pytest.raises(ValidationError, match="repeated: case-01"):
        EvalsFile.model_validate(data)


def test_vague_expectations_are_listed() -> None:
    vague = evals()
    vague["cases"][0]["expectations"][1]["description"] = "Length is reasonable"
    found = EvalsFile.model_validate(vague).vague_expectations()
    assert found == ["case-01/token-efficiency: 'Length is reasonable'"]


CASE = EvalsFile.model_validate(evals()).cases[0]


@pytest.mark.parametrize(
    ("scores", "overall", "overall_score", "required_score"),
    [
        pytest.param({"frontmatter": 4, "token-efficiency": 2}, "pass", 3.0, 4.0, id="opt-fails"),
        pytest.param({"frontmatter": 2, "token-efficiency": 5}, "fail", 3.5, 2.0, id="req-fails"),
        pytest.param({"frontmatter": 3, "token-efficiency": 3}, "pass", 3.0, 3.0, id="boundary"),
    ],
)
def test_grading_derivations(
    scores: dict[str, int], overall: str, overall_score: float, required_score: float
) -> None:
    results = [CriterionResult.of(c, s) for c, s in scores.items()]
    grading = build_grading(CASE, version=0, run=1, results=results)
    assert (grading.overall, grading.overall_score, grading.required_score) == (
        overall,
        overall_score,
        required_score,
    )
    assert [r.passed for r in grading.results] == [s >= 3 for s in scores.values()]
    grading.check_against(CASE)
    assert GradingFile.model_validate_json(grading.dump()) == grading
    assert grading.file_name == "case-01_v0_run1.json"


def grading_data(**changes: JSON) -> dict[str, JSON]:
    data: dict[str, JSON] = json.loads((EXAMPLES / "grading.json").read_text())
    data.update(changes)
    return data


def test_passed_is_derived_and_cannot_be_set_independently() -> None:
    data = grading_data()
    data["results"][1]["passed"] = True  # score 2
    with pytest.raises(ValidationError, match="derived from the score"):
        GradingFile.model_validate(data)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"overall_score": 4.5}, "not the mean", id="overall-score"),
        pytest.param(
            {"convention_compliance": {"style": {"passed": True}}}, "keys are fixed", id="conv"
        ),
    ],
)
def test_grading_rules(changes: dict[str, JSON], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        GradingFile.model_validate(grading_data(**changes))


def test_score_range() -> None:
    data = grading_data()
    data["results"][0]["score"] = 6
    with pytest.raises(ValidationError, match="less than or equal to 5"):
        GradingFile.model_validate(data)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"overall": "fail"}, "overall 'fail' should be 'pass'", id="overall"),
        pytest.param({"required_score": 3.0}, "required_score 3.0 should be 4.0", id="required"),
    ],
)
def test_grading_checked_against_its_case(changes: dict[str, JSON], message: str) -> None:
    grading = GradingFile.model_validate(grading_data(**changes))
    with pytest.raises(ValueError, match=message):
        grading.check_against(CASE)


def test_history_averages_and_rules() -> None:
    history = load(HistoryFile, EXAMPLES / "history.json")
    runs = [
        build_grading(
            CASE,
            1,
            run,
            [CriterionResult.of("frontmatter", s), CriterionResult.of("token-efficiency", 4)],
        )
        for run, s in ((1, 5), (2, 3))
    ]
    updated = history.with_averages(runs)
    assert [v.average_score for v in updated.versions] == [None, 4.0]
    data = json.loads(history.dump())
    data["current_version"] = 7
    with pytest.raises(ValidationError, match="names no version"):
        HistoryFile.model_validate(data)
    data["current_version"] = 0
    data["versions"][1]["version"] = 3
    with pytest.raises(ValidationError, match=r"numbered 0, 1, 2"):
        HistoryFile.model_validate(data)


def test_blind_labels_are_randomised_and_unblinded() -> None:
    rng = random.Random(7)
    pairs = [blind_pair("v0", "v1", rng) for _ in range(40)]
    first_is_a = [p.labels["A"] == "v0" for p in pairs]
    assert any(first_is_a)
    assert not all(first_is_a)  # the label does not follow version order
    comparison = load(ComparisonFile, EXAMPLES / "comparison.json")
    for pair in pairs[:4]:
        winner, loser = pair.unblind(comparison)
        assert winner == pair.labels["A"]
        assert {winner, loser} == {"v0", "v1"}
    suggestion = Suggestion(area="description", before="Use when deploying", after="Use when X")
    analysis = analysis_from(comparison, pairs[0], [suggestion], strengths=["clearer"])
    assert analysis.winner_version == pairs[0].labels["A"]
    assert AnalysisFile.model_validate_json(analysis.dump()) == analysis


def test_comparison_rules() -> None:
    data = json.loads((EXAMPLES / "comparison.json").read_text())
    data["winner"] = "v1"
    with pytest.raises(ValidationError, match="'A' or 'B'"):
        ComparisonFile.model_validate(data)
    data["winner"] = "A"
    data["scores"]["content_value"]["B"] = 11
    with pytest.raises(ValidationError, match="less than or equal to 10"):
        ComparisonFile.model_validate(data)


@pytest.mark.parametrize(
    ("suggestion", "message"),
    [
        pytest.param({"area": "d", "before": "", "after": "x"}, "at least 1", id="empty-before"),
        pytest.param({"area": "d", "before": "x", "after": "x "}, "must differ", id="no-change"),
        pytest.param({"area": "d", "after": "x"}, "before", id="missing-before"),
    ],
)
def test_suggestions_must_be_actionable(suggestion: dict[str, str], message: str) -> None:
    data = json.loads((EXAMPLES / "analysis.json").read_text())
    data["suggestions"] = [suggestion]
    with pytest.raises(ValidationError, match=message):
        AnalysisFile.model_validate(data)
