"""Verdicts and outcomes: the three-valued result of an assertion (plus `pending`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    PENDING = "pending"


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    message: str

    @staticmethod
    def passed(message: str) -> Outcome:
        return Outcome(Verdict.PASS, message)

    @staticmethod
    def failed(message: str) -> Outcome:
        return Outcome(Verdict.FAIL, message)

    @staticmethod
    def errored(message: str) -> Outcome:
        return Outcome(Verdict.ERROR, message)


def error_from_exception(exc: BaseException) -> Outcome:
    """In the hot path errors are data: an evaluator that raises yields an `error` verdict."""
    return Outcome(Verdict.ERROR, f"{type(exc).__name__}: {exc}")
