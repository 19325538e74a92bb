"""Flags a model grader whose rubric speaks of one score scale while it grades on another.

The model grader asks the judge for integers on `scoring.range` (default [1, 5]) and normalises
them as (score - low) / (high - low). A rubric written for 0-5 graded on the default 1-5 can
never get its 0, and every threshold shifts: that is a mistake in the suite, so it is reported
as a warning naming the fix. Nothing is rescaled behind the user's back.

The rubric's scale is read from explicit ranges near a scale word ("on a 0-5 scale",
"score from 0 to 5", "rate 0 to 10") and from anchor lines ("0: nothing relevant", "5 = complete").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from evalstream.assertions.graders.model import ModelGraderConfig
from evalstream.assertions.harness.models import EvalItem

SCALE_WORDS = re.compile(r"\b(scale|score|scored|scoring|rate|rating|points?|grade)\b", re.I)
RANGE = re.compile(r"(?<![\d.])(\d{1,2})\s*(?:-|\u2013|\u2014|to)\s*(\d{1,2})(?!\d|\.\d|%|\+)")
ANCHOR = re.compile(r"^\s*[-*]?\s*(\d{1,2})\s*(?::|=|\u2013|\u2014|\s-\s)\s*\S", re.M)


def rubric_scale(rubric: str) -> tuple[int, int] | None:
    """The score range the rubric text describes, or None when it names none."""
    for line in rubric.splitlines():
        if not SCALE_WORDS.search(line):
            continue
        for low, high in RANGE.findall(line):
            lo, hi = int(low), int(high)
            if lo in (0, 1) and lo < hi <= 10:
                return (lo, hi)
    anchors = sorted({int(n) for n in ANCHOR.findall(rubric) if int(n) <= 10})
    if len(anchors) >= 2 and anchors[0] in (0, 1):
        return (anchors[0], anchors[-1])
    return None


def scale_warning(key: str, config: ModelGraderConfig) -> str | None:
    if config.scoring.type != "numeric":
        return None
    described = rubric_scale(config.rubric)
    graded = config.scoring.scale()
    if described is None or described == graded:
        return None
    origin = "scoring.range" if "scoring" in config.model_fields_set else "the default range"
    lo, hi = described
    return (
        f"{key}: the rubric describes a {lo}-{hi} scale but the model grader scores on "
        f"{graded[0]}-{graded[1]} ({origin}); scores are normalised as (score - {graded[0]}) / "
        f"{graded[1] - graded[0]}, so the rubric's scale is misread. Set "
        f"`scoring: {{type: numeric, range: [{lo}, {hi}]}}` in the grader config (or reword the "
        "rubric)."
    )


def scale_warnings(items: Sequence[EvalItem]) -> list[str]:
    """One warning per model-graded item whose rubric and scoring range disagree."""
    out = []
    for item in items:
        if isinstance(item.grader, ModelGraderConfig):
            warning = scale_warning(item.key, item.grader)
            if warning is not None:
                out.append(warning)
    return out
