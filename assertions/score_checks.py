"""Validation helpers shared by the scoring modules (`scoring`, `safety`)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from assertions.errors import InputError

SCORE_DECIMALS = 12  # sums of penalties and weights: float noise must not cross a threshold


class ScoringConfigError(InputError):
    """A scoring configuration (weights, penalties, detectors) is invalid."""


def reject_unknown(obj: Mapping[str, Any], allowed: Collection[str], what: str) -> None:
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise ScoringConfigError(
            f"unknown {what} {', '.join(unknown)}; valid: {', '.join(sorted(allowed))}"
        )


def check_number(value: object, what: str, error: type[InputError]) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise error(f"{what} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise error(f"{what} must be finite, got {value!r}")
    if number < 0:
        raise error(f"{what} must be >= 0, got {value!r}")
    return number
