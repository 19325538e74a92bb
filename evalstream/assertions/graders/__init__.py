"""The eval-harness graders: code graders (exact match, regex, function output, structural), the
model grader (through an injected `Judge`) and the shared result type. Re-exports only."""

from evalstream.assertions.graders.exact_match import ExactMatchConfig, grade_exact_match
from evalstream.assertions.graders.function_output import (
    CodeRunner,
    FunctionOutputConfig,
    FunctionTestCase,
    SandboxLimits,
    SandboxRun,
    grade_function_output,
)
from evalstream.assertions.graders.model import ModelGraderConfig, grade_with_model
from evalstream.assertions.graders.regex_match import RegexConfig, grade_regex
from evalstream.assertions.graders.result import GradeResult
from evalstream.assertions.graders.structural import (
    Difference,
    StructuralConfig,
    compare_structures,
    grade_structural,
)

__all__ = [
    "CodeRunner",
    "Difference",
    "ExactMatchConfig",
    "FunctionOutputConfig",
    "FunctionTestCase",
    "GradeResult",
    "ModelGraderConfig",
    "RegexConfig",
    "SandboxLimits",
    "SandboxRun",
    "StructuralConfig",
    "compare_structures",
    "grade_exact_match",
    "grade_function_output",
    "grade_regex",
    "grade_structural",
    "grade_with_model",
]
