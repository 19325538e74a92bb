"""The judge protocol: what an `llm.judge` asks, and what a judge answers.

The pure core only builds requests and turns verdicts into outcomes; the HTTP client that asks
a model lives in `evalstream/connectors/`. With no judge configured, a judge assertion is `error`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from evalstream.assertions.evaluation.verdicts import Outcome

JSON = Any


@dataclass(frozen=True)
class JudgeExample:
    """A calibration (few-shot) example: an output the rubric's author already scored.

    `score` is on the request's scale; `input` is the task that output answered.
    """

    output: str
    score: int
    justification: str = ""
    input: JSON = None


@dataclass(frozen=True)
class JudgeRequest:
    """One question to a judge: score `output` on each criterion.

    `scale` is the inclusive integer range of a criterion's score (signal-native spec: 1-5); a
    verdict's
    `score` is the mean criterion score normalised to [0, 1] and compared with `min_score`.
    `task` is the input the output answered and `expected` a reference answer, both optional.
    """

    criteria: tuple[str, ...]
    output: str
    min_score: float
    rubric: str | None = None
    model: str | None = None
    temperature: float | None = 0.0
    task: JSON = None
    expected: JSON = None
    examples: tuple[JudgeExample, ...] = ()
    scale: tuple[int, int] = (1, 5)

    def cache_key(self) -> str:
        """Content hash: the same question about the same text is asked once."""
        blob = orjson.dumps(
            {
                "criteria": self.criteria,
                "output": self.output,
                "rubric": self.rubric,
                "model": self.model,
                "temperature": self.temperature,
                "task": self.task,
                "expected": self.expected,
                "examples": [[e.output, e.score, e.justification, e.input] for e in self.examples],
                "scale": self.scale,
            },
            option=orjson.OPT_SORT_KEYS,
            default=str,
        )
        return hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True)
class JudgeVerdict:
    """A judge's answer: `score` in [0, 1] (criteria scored 1-5, normalised)."""

    score: float
    reasoning: str = ""
    criteria_scores: dict[str, float] = field(default_factory=dict)
    cost_usd: float = 0.0
    latency_ms: float = 0.0

    def outcome(self, min_score: float) -> Outcome:
        label = f"judge score {self.score:.2f} (min {min_score:.2f})"
        if self.reasoning:
            label += f": {self.reasoning}"
        return Outcome.passed(label) if self.score >= min_score else Outcome.failed(label)


class Judge(Protocol):
    async def judge(self, request: JudgeRequest) -> JudgeVerdict: ...


NO_JUDGE = Outcome.errored(
    "no judge configured: llm.judge needs a judge (set ANTHROPIC_API_KEY or pass --judge); "
    "it is never counted as a pass"
)
