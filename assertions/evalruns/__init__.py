"""Dataset runs' pure half: case selection, results, aggregates, pass@k / pass^k, threshold
profiles, compare(), matrix ranking and the reports. The runner lives in `stream.evalruns`."""

from assertions.evalruns.compare import CompareOptions, Comparison, compare
from assertions.evalruns.matrix import MatrixResult, VariantResult, matrix_result
from assertions.evalruns.models import CaseResult, DatasetResult, SampleResult
from assertions.evalruns.profiles import PROFILES, check_profile, profile
from assertions.evalruns.reports import is_eval_run, load_eval_document, render_eval_report
from assertions.evalruns.selection import select_cases

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
