"""The eval-harness model grader over an injected judge: pass, fail, error, and the request it
asks."""

from __future__ import annotations

import asyncio

import pytest

from evalstream.assertions.graders import ModelGraderConfig, grade_with_model
from evalstream.assertions.judge.protocol import JudgeRequest, JudgeVerdict

CONFIG = ModelGraderConfig.model_validate(
    {
        "model": "claude-haiku-4-5",
        "rubric": "Evaluate code review comment quality",
        "scoring": {"type": "numeric", "range": [1, 5]},
        "examples": [
            {"input": "console.log", "output": "Remove it", "score": 2, "justification": "brief"}
        ],
    }
)


class FixedJudge:
    def __init__(self, score: float | Exception) -> None:
        self.score = score
        self.asked: list[JudgeRequest] = []

    async def judge(self, request: JudgeRequest) -> JudgeVerdict:
        self.asked.append(request)
        if isinstance(self.score, Exception):
            raise self.score
        return JudgeVerdict(score=self.score, reasoning="because")


@pytest.mark.parametrize(("score", "status"), [(0.75, "pass"), (0.5, "pass"), (0.25, "fail")])
def test_pass_threshold(score: float, status: str) -> None:
    judge = FixedJudge(score)
    result = asyncio.run(grade_with_model("a comment", CONFIG, judge, task="diff"))
    assert result.status == status
    [asked] = judge.asked
    assert (asked.scale, asked.min_score, asked.temperature) == ((1, 5), 0.5, 0.0)
    assert asked.examples[0].score == 2
    assert asked.task == "diff"


def test_judge_failure_is_an_error_not_a_pass() -> None:
    result = asyncio.run(grade_with_model("x", CONFIG, FixedJudge(RuntimeError("overloaded"))))
    assert result.status == "error"
    assert "overloaded" in (result.error or "")


def test_boolean_scoring_uses_a_0_1_scale() -> None:
    config = CONFIG.model_copy(
        update={"scoring": CONFIG.scoring.model_copy(update={"type": "boolean"})}
    )
    judge = FixedJudge(1.0)
    asyncio.run(grade_with_model("x", config, judge))
    assert judge.asked[0].scale == (0, 1)
