"""What a judge used in a run: questions by outcome, tokens (prompt cache included), USD.

The Anthropic judge keeps one (`AnthropicJudge.stats`); a run's report carries a copy, so the
spend and the prompt cache's saving are read where the verdicts are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

JSON = Any


@dataclass
class JudgeUsage:
    """Totals since the judge was made (cached answers cost nothing)."""

    calls: int = 0
    ok: int = 0
    errors: int = 0
    cached: int = 0
    budget_exhausted: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_saving_usd: float = 0.0
    cost_usd: float = 0.0
    latency_s: float = 0.0

    def summary(self) -> str:
        """One line for a run's report."""
        line = f"judge: {self.ok} answered, {self.cached} cached, {self.errors} errors"
        if self.budget_exhausted:
            line += f", {self.budget_exhausted} refused by the budget"
        line += (
            f"; {self.input_tokens:,} input + {self.output_tokens:,} output tokens"
            f", ${self.cost_usd:.4f}"
        )
        if self.cache_read_tokens or self.cache_write_tokens:
            line += (
                f"; prompt cache: {self.cache_read_tokens:,} read, "
                f"{self.cache_write_tokens:,} written, saved ${self.cache_saving_usd:.4f}"
            )
        return line

    def to_json(self) -> dict[str, JSON]:
        return {
            "questions": {
                "ok": self.ok,
                "error": self.errors,
                "cached": self.cached,
                "budget_exhausted": self.budget_exhausted,
            },
            "retries": self.retries,
            "tokens": {
                "input": self.input_tokens,
                "output": self.output_tokens,
                "cache_read": self.cache_read_tokens,
                "cache_write": self.cache_write_tokens,
            },
            "cost_usd": round(self.cost_usd, 10),
            "cache_saving_usd": round(self.cache_saving_usd, 10),
        }
