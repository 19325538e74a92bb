"""The eval-harness model grader, asked through the same `Judge` as `llm.judge`.

The configuration is the eval-harness (`model`, `temperature`, `rubric`, `scoring`, `examples`);
`criteria` (optional) lists what to score, by default one criterion: the rubric as a whole.
`scoring.type`: `numeric` (integers on `range`, default [1, 5]) or `boolean` (0 or 1). The
score is normalised to [0, 1]; the grader passes at `pass_threshold` (default 0.5, which on a
1-5 scale is 3, the skill-eval "met minimally"). `max_tokens` is the connector's setting
(`EVALSTREAM_JUDGE_MAX_TOKENS`); a per-grader value is accepted and not used.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalstream.assertions.evaluation.verdicts import error_from_exception
from evalstream.assertions.graders.result import GradeResult
from evalstream.assertions.judge.protocol import Judge, JudgeExample, JudgeRequest
from evalstream.assertions.kinds.judge import DEFAULT_JUDGE_MODEL

JSON = Any
RUBRIC_CRITERION = "meets the rubric"


class Scoring(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["numeric", "boolean"] = "numeric"
    range: tuple[int, int] = (1, 5)

    @model_validator(mode="after")
    def _range(self) -> Scoring:
        if self.range[1] <= self.range[0]:
            raise ValueError(f"scoring.range {list(self.range)}: the upper bound must be larger")
        return self

    def scale(self) -> tuple[int, int]:
        return (0, 1) if self.type == "boolean" else self.range


class CalibrationExample(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    input: JSON = None
    output: str
    score: int
    justification: str = ""


class ModelGraderConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = DEFAULT_JUDGE_MODEL
    temperature: float | None = Field(0.0, ge=0, le=1)
    max_tokens: int | None = None
    rubric: str
    criteria: list[str] = Field(default_factory=lambda: [RUBRIC_CRITERION], min_length=1)
    scoring: Scoring = Field(default_factory=Scoring)
    examples: list[CalibrationExample] = Field(default_factory=list)
    pass_threshold: float = Field(0.5, ge=0, le=1)

    def request(self, output: str, task: JSON = None, expected: JSON = None) -> JudgeRequest:
        return JudgeRequest(
            criteria=tuple(self.criteria),
            output=output,
            min_score=self.pass_threshold,
            rubric=self.rubric,
            model=self.model,
            temperature=self.temperature,
            task=task,
            expected=expected,
            examples=tuple(
                JudgeExample(e.output, e.score, e.justification, e.input) for e in self.examples
            ),
            scale=self.scoring.scale(),
        )


async def grade_with_model(
    output: str,
    config: ModelGraderConfig,
    judge: Judge | None,
    *,
    task: JSON = None,
    expected: JSON = None,
) -> GradeResult:
    if judge is None:
        return GradeResult.errored(
            "no judge configured: the model grader needs ANTHROPIC_API_KEY; never a pass"
        )
    request = config.request(output, task, expected)
    try:
        verdict = await judge.judge(request)
    except Exception as exc:  # errors are data: the grade is `error`
        return GradeResult.errored(error_from_exception(exc).message)
    return GradeResult(
        passed=verdict.score >= config.pass_threshold,
        score=verdict.score,
        details={
            "criteria_scores": verdict.criteria_scores,
            "justification": verdict.reasoning,
            "model": config.model,
            "cost_usd": verdict.cost_usd,
            "latency_ms": verdict.latency_ms,
        },
    )
