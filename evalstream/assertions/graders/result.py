"""What every grader returns: the eval-harness `{passed, score, details}`, plus an error state.

A grader that cannot decide (a regex timeout, a judge that did not answer, a sandbox that did
not start) reports `error` with a message; it never reports a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSON = Any


@dataclass(frozen=True)
class GradeResult:
    passed: bool
    score: float
    details: dict[str, JSON] = field(default_factory=dict)
    error: str | None = None

    @property
    def status(self) -> str:
        """`pass`, `fail` or `error`."""
        if self.error is not None:
            return "error"
        return "pass" if self.passed else "fail"

    @staticmethod
    def errored(message: str, **details: JSON) -> GradeResult:
        return GradeResult(passed=False, score=0.0, details=details, error=message)

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "status": self.status,
            "passed": self.passed,
            "score": self.score,
            "details": self.details,
        }
        if self.error is not None:
            out["error"] = self.error
        return out
