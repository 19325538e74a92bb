"""Dataset runs' pure half: case selection, results, aggregates, pass@k / pass^k, threshold
profiles, compare(), matrix ranking and the reports. The runner lives in
`evalstream.stream.evalruns`.

The names in `__all__` are imported on first use, so that a light module of the package
(`choices`) does not load the run models."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalstream.assertions.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from evalstream.assertions.evalruns.compare import CompareOptions, Comparison, compare
    from evalstream.assertions.evalruns.matrix import MatrixResult, VariantResult, matrix_result
    from evalstream.assertions.evalruns.models import CaseResult, DatasetResult, SampleResult
    from evalstream.assertions.evalruns.profiles import PROFILES, check_profile, profile
    from evalstream.assertions.evalruns.reports import (
        is_eval_run,
        load_eval_document,
        render_eval_report,
    )
    from evalstream.assertions.evalruns.selection import select_cases

__all__ = [
    "PROFILES",
    "CaseResult",
    "CompareOptions",
    "Comparison",
    "DatasetResult",
    "MatrixResult",
    "SampleResult",
    "VariantResult",
    "check_profile",
    "compare",
    "is_eval_run",
    "load_eval_document",
    "matrix_result",
    "profile",
    "render_eval_report",
    "select_cases",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "evalstream.assertions.evalruns.compare": ("CompareOptions", "Comparison", "compare"),
        "evalstream.assertions.evalruns.matrix": ("MatrixResult", "VariantResult", "matrix_result"),
        "evalstream.assertions.evalruns.models": ("CaseResult", "DatasetResult", "SampleResult"),
        "evalstream.assertions.evalruns.profiles": ("PROFILES", "check_profile", "profile"),
        "evalstream.assertions.evalruns.reports": (
            "is_eval_run",
            "load_eval_document",
            "render_eval_report",
        ),
        "evalstream.assertions.evalruns.selection": ("select_cases",),
    },
)
