"""llm.judge: a model grades the output against criteria (through an injected judge)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.judge.protocol import NO_JUDGE, JudgeRequest
from evalstream.assertions.kinds.base import AssertionType, CompileContext, Interest, Leaf
from evalstream.assertions.kinds.output import NO_OUTPUT

DEFAULT_JUDGE_MODEL = "claude-sonnet-4-20250514"


class LlmJudge(AssertionSpec):
    """A judge model scores the output on each criterion (1-5, normalised to 0-1)."""

    type: Literal["llm.judge"] = "llm.judge"
    criteria: list[str] = Field(min_length=1)
    rubric: str | None = None
    min_score: float = Field(alias="minScore", ge=0, le=1)
    model: str | None = None
    temperature: float = Field(0.0, ge=0, le=1)

    def request(self, output: str) -> JudgeRequest:
        return JudgeRequest(
            criteria=tuple(self.criteria),
            output=output,
            min_score=self.min_score,
            rubric=self.rubric,
            model=self.model or DEFAULT_JUDGE_MODEL,
            temperature=self.temperature,
        )


class JudgeLeaf(Leaf[LlmJudge]):
    """Decided at close by the engine's caller, which owns the (async) judge."""

    is_judge: ClassVar[bool] = True

    def __init__(self, spec: LlmJudge) -> None:
        super().__init__(spec, Interest.close_only())

    def request(self, facts: EpisodeFacts) -> JudgeRequest | Outcome:
        output = facts.output()
        if output is None:
            return Outcome.failed(NO_OUTPUT)
        return self.spec.request(output)

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return NO_JUDGE


def ref_judge(spec: LlmJudge, ep: ReferenceEpisode) -> Outcome:
    output = ep.output()
    if output is None:
        return Outcome.failed(NO_OUTPUT)
    if ep.judge is None:
        return NO_JUDGE
    return ep.judge(spec.request(output))


def _build(spec: LlmJudge, ctx: CompileContext) -> Leaf[Any]:
    return JudgeLeaf(spec)


TYPES = [AssertionType("llm.judge", LlmJudge, _build, ref_judge, "judge")]
