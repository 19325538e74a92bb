"""Exact match: the output equals the expected value after optional normalisation.

Options as in the eval-harness methodology: `case_sensitive` (default true), `trim_whitespace`
(true: strip both
ends), `normalize_newlines` (true: CRLF and CR become LF). Non-string expected values are
compared in their JSON spelling (`120`, `true`), so a number can be expected from text.
Any of `alternatives` also passes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from evalstream.assertions.graders.result import GradeResult

JSON = Any


class ExactMatchConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Literal["exact_match", "exact"] = "exact_match"
    case_sensitive: bool = True
    trim_whitespace: bool = True
    normalize_newlines: bool = True

    def normalise(self, value: JSON) -> str:
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        if self.normalize_newlines:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if self.trim_whitespace:
            text = text.strip()
        if not self.case_sensitive:
            text = text.casefold()
        return text


def grade_exact_match(
    output: JSON, expected: JSON, config: ExactMatchConfig, alternatives: Sequence[JSON] = ()
) -> GradeResult:
    actual = config.normalise(output)
    targets = [config.normalise(e) for e in (expected, *alternatives)]
    passed = actual in targets
    return GradeResult(
        passed=passed,
        score=1.0 if passed else 0.0,
        details={"expected": targets[0], "actual": actual, "alternatives": targets[1:]},
    )
