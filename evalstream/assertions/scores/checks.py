"""Validation helpers shared by the scoring modules (`scoring`, `safety`)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from evalstream.assertions.errors import InputError

SCORE_DECIMALS = 12  # sums of penalties and weights: float noise must not cross a threshold


class ScoringConfigError(InputError):
    """A scoring configuration (weights, penalties, detectors) is invalid."""


def reject_unknown(obj: Mapping[str, Any], allowed: Collection[str], what: str) -> None:
    if not isinstance(obj, Mapping):
        raise ScoringConfigError(
            f"{what} must be a mapping of {', '.join(sorted(allowed))}, got {obj!r}"
        )
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


# Kinds of raw configuration values, checked before they reach a typed constructor: a value of
# the wrong type would otherwise fail later with a bare TypeError that does not say which
# setting it was, so the boundaries that read files check first.
NUMBER, OPTIONAL_NUMBER, INTEGER = "a number", "a number or null", "an integer"
TEXT, OPTIONAL_TEXT, TEXTS = "a string", "a string or null", "a list of strings"


def check_types(
    obj: Mapping[str, Any], kinds: Mapping[str, str], what: str, error: type[InputError]
) -> None:
    """Each key of `kinds` present in `obj` must hold a value of that kind (NUMBER,
    OPTIONAL_NUMBER, INTEGER, TEXT, OPTIONAL_TEXT, TEXTS); the error names `what`, the key
    and the value."""
    for key, kind in kinds.items():
        if key in obj and not _is_kind(obj[key], kind):
            raise error(f"{what} `{key}` must be {kind}, got {obj[key]!r}")


def _is_kind(value: object, kind: str) -> bool:
    if kind == NUMBER:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == OPTIONAL_NUMBER:
        return value is None or _is_kind(value, NUMBER)
    if kind == INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == TEXT:
        return isinstance(value, str)
    if kind == OPTIONAL_TEXT:
        return value is None or isinstance(value, str)
    if kind == TEXTS:
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    raise ValueError(f"unknown kind {kind!r}")
