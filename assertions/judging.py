"""The judge protocol: what an `llm.judge` asks, and what a judge answers.

The pure core only builds requests and turns verdicts into outcomes; the HTTP client that asks
a model lives in `connectors/`. With no judge configured, a judge assertion is `error`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from assertions.verdicts import Outcome

JSON = Any


@dataclass(frozen=True)
class JudgeRequest:
    criteria: tuple[str, ...]
    output: str
    min_score: float
    rubric: str | None = None
    model: str | None = None
    temperature: float = 0.0
    task: JSON = None

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
