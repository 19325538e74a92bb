"""Regex match: the output matches (or, with `must_match: false`, does not match) a pattern.

Flags by the eval-harness names (`multiline`, `ignorecase`, `dotall`, `verbose`, `ascii`); named or
positional `capture_groups` are reported in `details.captures`. Patterns run with a time bound
(the `regex` module's timeout): a pathological pattern yields `error`, not a hang.

Deliberate difference from the seed's sample: `score` follows `passed` (1.0 when the grader
passes), so `must_match: false` with no match scores 1.0 rather than 0.0.
"""

from __future__ import annotations

from typing import Any, Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator

from evalstream.assertions.evaluation.bounded_regex import DEFAULT_TIMEOUT_S
from evalstream.assertions.graders.result import GradeResult

JSON = Any
FLAGS = {
    "multiline": regex.MULTILINE,
    "ignorecase": regex.IGNORECASE,
    "dotall": regex.DOTALL,
    "verbose": regex.VERBOSE,
    "ascii": regex.ASCII,
}


class RegexConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Literal["regex"] = "regex"
    pattern: str
    flags: list[str] = Field(default_factory=list)
    must_match: bool = True
    capture_groups: list[str] = Field(default_factory=list)
    timeout_s: float = Field(DEFAULT_TIMEOUT_S, gt=0)

    @field_validator("flags")
    @classmethod
    def _known_flags(cls, flags: list[str]) -> list[str]:
        for flag in flags:
            if flag not in FLAGS:
                raise ValueError(f"unknown regex flag {flag!r}; valid flags: {', '.join(FLAGS)}")
        return flags

    def compiled(self) -> regex.Pattern[str]:
        bits = regex.V0
        for flag in self.flags:
            bits |= FLAGS[flag]
        try:
            return regex.compile(self.pattern, bits)
        except regex.error as exc:
            raise ValueError(f"regex {self.pattern!r} does not compile: {exc}") from exc


def _group(match: regex.Match[str], name: str, position: int) -> str | None:
    if name in match.groupdict():
        return match.group(name)
    if position <= len(match.groups()):
        return match.group(position)
    return None


def grade_regex(output: str, config: RegexConfig) -> GradeResult:
    try:
        compiled = config.compiled()
    except ValueError as exc:
        return GradeResult.errored(str(exc), pattern=config.pattern)
    try:
        match = compiled.search(output, timeout=config.timeout_s)
    except TimeoutError:
        return GradeResult.errored(
            f"regex {config.pattern!r} exceeded its {config.timeout_s:g}s bound on a "
            f"{len(output)}-character output",
            pattern=config.pattern,
        )
    passed = (match is not None) == config.must_match
    details: dict[str, JSON] = {"pattern": config.pattern, "matched": match is not None}
    if match is not None and config.capture_groups:
        details["captures"] = {
            name: _group(match, name, i) for i, name in enumerate(config.capture_groups, 1)
        }
    return GradeResult(passed=passed, score=1.0 if passed else 0.0, details=details)
