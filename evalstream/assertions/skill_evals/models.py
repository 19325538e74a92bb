"""The skill-eval skill-eval files: evals.json, grading.json, history.json, comparison.json and
analysis.json, as validated models that load, check and round-trip (`dump` writes what
`load` reads).

The seed's rules are enforced, not just documented:

- evals.json: case ids unique and kebab-case; every case has at least one `required: true`
  expectation (otherwise it could never fail); `vague_expectations` lists descriptions with
  the words the seed forbids ("appropriate", "reasonable"), for a warning.
- grading.json: scores are integers 1-5; `passed` is derived (`score >= 3`) and a file that
  disagrees is rejected; `overall_score` is the mean of all scores (one decimal);
  `required_score` the mean of the required criteria and `overall` is `pass` only when every
  required criterion passed - both need the case's expectations, so `build_grading` computes
  them and `check_against(case)` verifies a loaded file.
- history.json: versions numbered 0, 1, 2, ... in order; `current_version` names one of them;
  `average_score` is the mean of that version's grading `overall_score`s (`with_averages`).
- comparison.json: `winner` is A or B; per-dimension scores are integers 1-10. The labels are
  randomised per comparison by `blind_pair` (injected `random.Random`), and `unblind` maps
  the winner back to its version.
- analysis.json: each suggestion carries non-empty, different `before` and `after`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

JSON = Any
PASS_SCORE = 3
VAGUE_WORDS = ("appropriate", "reasonable")
CONVENTION_KEYS = (
    "frontmatter",
    "description_field",
    "token_efficiency",
    "progressive_disclosure",
    "type_alignment",
)
_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class SeedFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def dump(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2) + "\n"


F = TypeVar("F", bound=SeedFile)


def load(model: type[F], path: str | Path) -> F:
    """Reads and validates one file; pydantic's ValidationError names the field."""
    return model.model_validate_json(Path(path).read_text("utf-8"))


# --- evals.json --------------------------------------------------------------------------


class Expectation(SeedFile):
    criterion: str = Field(min_length=1)
    description: str = Field(min_length=1)
    required: bool


class EvalCase(SeedFile):
    id: str
    prompt: str = Field(min_length=1)
    files: list[str] = Field(default_factory=list)
    expectations: list[Expectation] = Field(min_length=1)

    @field_validator("id")
    @classmethod
    def _kebab(cls, value: str) -> str:
        if not _KEBAB.match(value):
            raise ValueError(f"case id {value!r} must be kebab-case (e.g. case-01)")
        return value

    @model_validator(mode="after")
    def _required(self) -> EvalCase:
        if not any(e.required for e in self.expectations):
            raise ValueError(
                f"case {self.id!r} has no `required: true` expectation, so it could never "
                "fail; mark at least one expectation required"
            )
        criteria = [e.criterion for e in self.expectations]
        if len(set(criteria)) != len(criteria):
            raise ValueError(f"case {self.id!r}: criterion labels must be unique")
        return self

    def expectation(self, criterion: str) -> Expectation:
        for e in self.expectations:
            if e.criterion == criterion:
                return e
        raise ValueError(f"case {self.id!r} has no criterion {criterion!r}")


class EvalsFile(SeedFile):
    version: str = "1.0"
    skill: str
    cases: list[EvalCase] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> EvalsFile:
        ids = [c.id for c in self.cases]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"case ids must be unique; repeated: {', '.join(duplicates)}")
        return self

    def case(self, case_id: str) -> EvalCase:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise ValueError(f"no case {case_id!r} in evals.json")

    def vague_expectations(self) -> list[str]:
        return [
            f"{c.id}/{e.criterion}: {e.description!r}"
            for c in self.cases
            for e in c.expectations
            if any(re.search(rf"\b{w}\b", e.description, re.IGNORECASE) for w in VAGUE_WORDS)
        ]


# --- grading.json ------------------------------------------------------------------------


class CriterionResult(SeedFile):
    criterion: str
    score: int = Field(ge=1, le=5)
    passed: bool
    reasoning: str = ""

    @model_validator(mode="after")
    def _derived(self) -> CriterionResult:
        if self.passed != (self.score >= PASS_SCORE):
            raise ValueError(
                f"criterion {self.criterion!r}: `passed` is derived from the score "
                f"(score >= {PASS_SCORE}); score {self.score} means passed="
                f"{str(self.score >= PASS_SCORE).lower()}"
            )
        return self

    @classmethod
    def of(cls, criterion: str, score: int, reasoning: str = "") -> CriterionResult:
        return cls(
            criterion=criterion, score=score, passed=score >= PASS_SCORE, reasoning=reasoning
        )


class ConventionCheck(SeedFile):
    passed: bool
    details: str = ""


class Claim(SeedFile):
    claim: str
    verified: bool
    evidence: str = ""


def _mean1(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


class GradingFile(SeedFile):
    case_id: str
    version: int = Field(ge=0)
    run: int = Field(ge=1)
    overall_score: float
    required_score: float | None
    results: list[CriterionResult] = Field(min_length=1)
    overall: Literal["pass", "fail"]
    convention_compliance: dict[str, ConventionCheck] = Field(default_factory=dict)
    claims: list[Claim] = Field(default_factory=list)
    user_notes_summary: str = ""
    eval_feedback: str = ""
    execution_metrics: dict[str, JSON] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> GradingFile:
        unknown = set(self.convention_compliance) - set(CONVENTION_KEYS)
        if unknown:
            raise ValueError(
                f"convention_compliance keys are fixed ({', '.join(CONVENTION_KEYS)}); "
                f"unknown: {', '.join(sorted(unknown))}"
            )
        mean = _mean1([r.score for r in self.results])
        if mean is not None and abs(self.overall_score - mean) > 0.05:
            raise ValueError(
                f"overall_score {self.overall_score} is not the mean of the scores ({mean})"
            )
        return self

    @property
    def file_name(self) -> str:
        """`grading/<case_id>_v<version>_run<run>.json`, as the seed names it."""
        return f"{self.case_id}_v{self.version}_run{self.run}.json"

    def check_against(self, case: EvalCase) -> None:
        """The parts that need the case: every expectation graded, required score, overall."""
        graded = {r.criterion for r in self.results}
        missing = [e.criterion for e in case.expectations if e.criterion not in graded]
        extra = sorted(graded - {e.criterion for e in case.expectations})
        if missing or extra:
            raise ValueError(
                f"grading of {case.id!r}: missing criteria {missing}, unknown criteria {extra}"
            )
        expected = build_grading(case, self.version, self.run, self.results)
        if self.required_score != expected.required_score:
            raise ValueError(
                f"required_score {self.required_score} should be {expected.required_score}"
            )
        if self.overall != expected.overall:
            raise ValueError(
                f"overall {self.overall!r} should be {expected.overall!r}: it is 'pass' only "
                "when every required criterion passed"
            )


def build_grading(
    case: EvalCase,
    version: int,
    run: int,
    results: Sequence[CriterionResult],
    **extra: JSON,
) -> GradingFile:
    """A grading.json with every derived field computed from the scores and the case."""
    required = [r for r in results if case.expectation(r.criterion).required]
    overall_score = _mean1([r.score for r in results])
    if overall_score is None:
        raise ValueError("a grading needs at least one criterion result")
    return GradingFile(
        case_id=case.id,
        version=version,
        run=run,
        overall_score=overall_score,
        required_score=_mean1([r.score for r in required]),
        results=list(results),
        overall="pass" if all(r.passed for r in required) else "fail",
        **extra,
    )


# --- history.json ------------------------------------------------------------------------


class Version(SeedFile):
    version: int = Field(ge=0)
    timestamp: str
    description: str = ""
    git_hash: str | None = None
    path: str
    average_score: float | None = None


class HistoryFile(SeedFile):
    versions: list[Version] = Field(min_length=1)
    current_version: int = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> HistoryFile:
        numbers = [v.version for v in self.versions]
        if numbers != list(range(len(numbers))):
            raise ValueError(f"versions must be numbered 0, 1, 2, ... in order; got {numbers}")
        if self.current_version not in numbers:
            raise ValueError(
                f"current_version {self.current_version} names no version (have {numbers})"
            )
        return self

    def with_averages(self, gradings: Sequence[GradingFile]) -> HistoryFile:
        """Every version's `average_score`: the mean `overall_score` of its gradings."""
        versions = []
        for v in self.versions:
            scores = [g.overall_score for g in gradings if g.version == v.version]
            versions.append(v.model_copy(update={"average_score": _mean1(scores)}))
        return self.model_copy(update={"versions": versions})


# --- comparison.json (blind A/B) ---------------------------------------------------------


class PairScore(SeedFile):
    A: int = Field(ge=1, le=10)
    B: int = Field(ge=1, le=10)


class ComparisonFile(SeedFile):
    eval_prompt: str
    winner: Literal["A", "B"]
    reasoning: str = ""
    scores: dict[str, PairScore] = Field(default_factory=dict)


@dataclass(frozen=True)
class BlindPair:
    """Which version hides behind which label. Kept by the orchestrator, never shown to the
    comparator (comparison.json does not contain it)."""

    labels: Mapping[str, str]  # "A" / "B" -> version label

    def unblind(self, comparison: ComparisonFile) -> tuple[str, str]:
        """(winner version, loser version)."""
        loser = "B" if comparison.winner == "A" else "A"
        return self.labels[comparison.winner], self.labels[loser]


def blind_pair(version_x: str, version_y: str, rng: random.Random) -> BlindPair:
    """Randomised labels: which version is A is a coin flip, not the version order."""
    first, second = (version_x, version_y) if rng.random() < 0.5 else (version_y, version_x)
    return BlindPair({"A": first, "B": second})


# --- analysis.json -----------------------------------------------------------------------


class Suggestion(SeedFile):
    area: str = Field(min_length=1)
    before: str = Field(min_length=1)
    after: str = Field(min_length=1)
    reasoning: str = ""

    @model_validator(mode="after")
    def _actionable(self) -> Suggestion:
        if self.before.strip() == self.after.strip():
            raise ValueError(f"suggestion for {self.area!r}: `after` must differ from `before`")
        return self


class AnalysisFile(SeedFile):
    winner_version: str
    loser_version: str
    strengths: list[str] = Field(default_factory=list)
    weaknesses: list[str] = Field(default_factory=list)
    suggestions: list[Suggestion] = Field(default_factory=list)

    @model_validator(mode="after")
    def _distinct(self) -> AnalysisFile:
        if self.winner_version == self.loser_version:
            raise ValueError("winner_version and loser_version must differ")
        return self


def analysis_from(
    comparison: ComparisonFile, pair: BlindPair, suggestions: Sequence[Suggestion], **kw: JSON
) -> AnalysisFile:
    """analysis.json after a blind comparison: the winner unblinded to its version label."""
    winner, loser = pair.unblind(comparison)
    return AnalysisFile(
        winner_version=winner, loser_version=loser, suggestions=list(suggestions), **kw
    )
