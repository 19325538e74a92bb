"""Function output: run generated code on test cases and compare what the function returns.

Pure part: the configuration, the harness script, the comparators and the aggregation. The
code runs through an injected `CodeRunner` (`evalstream.connectors.sandboxing.bwrap.BwrapSandbox`: a
bubblewrap sandbox with its own namespaces, a read-only view of the interpreter only, and
CPU, memory, file-size, process-count and wall-clock limits; chosen by
`evalstream.connectors.sandboxing.code_runner.code_runner`). Each test case runs in its own sandbox,
so one case's crash, hang or state cannot touch another, and each reports its own result. The
grade's details say what confined the code (`sandbox`: `bwrap`, or `off` when the user opted out).

Generated code that crashes, times out or returns the wrong value *fails* its case; the
grader reports `error` only when the runner itself could not run (it never passes then).

Test cases take the eval-harness grader form (`args`, `kwargs`, `expected`, `comparator`) or its
capability-eval form (`input`, `output`). Comparators: `equals` (JSON equality, tuples as
lists), `approx` (numbers within `tolerance`, relative and absolute), `contains` (a member of
the result, or a substring), `unordered` (equal as multisets), `raises` (the function raises
the exception type named by `expected`).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalstream.assertions.graders.result import GradeResult

JSON = Any
RESULT_FILE = "result.json"
SOLUTION_FILE = "solution.py"
HARNESS_FILE = "harness.py"


class FunctionTestCase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    args: list[JSON] = Field(default_factory=list)
    kwargs: dict[str, JSON] = Field(default_factory=dict)
    expected: JSON = None
    comparator: Literal["equals", "approx", "contains", "unordered", "raises"] = "equals"
    tolerance: float = Field(1e-9, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _capability_form(cls, data: JSON) -> JSON:
        """The eval-harness capability evals write `input` / `output` for `args` / `expected`."""
        if isinstance(data, dict) and ("input" in data or "output" in data):
            data = dict(data)
            if "input" in data:
                data["args"] = data.pop("input")
            if "output" in data:
                data["expected"] = data.pop("output")
        return data


class FunctionOutputConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Literal["function_output"] = "function_output"
    executor: Literal["python"] = "python"
    function_name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    test_cases: list[FunctionTestCase] = Field(default_factory=list)
    timeout_per_case: float = Field(5.0, gt=0, le=600)
    # Kept for the eval-harness file format; a suite cannot turn the sandbox off, only the
    # person running the grader can (`--no-sandbox`, `EVALSTREAM_SANDBOX=off`).
    sandbox: bool = True
    memory_mb: int = Field(512, ge=64)
    cpu_seconds: float | None = Field(None, gt=0, description="Default: timeout_per_case.")

    def limits(self) -> SandboxLimits:
        return SandboxLimits(
            timeout_s=self.timeout_per_case,
            cpu_seconds=self.cpu_seconds or self.timeout_per_case,
            memory_mb=self.memory_mb,
        )


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float
    cpu_seconds: float
    memory_mb: int
    file_size_mb: int = 16
    max_processes: int = 64


@dataclass(frozen=True)
class SandboxRun:
    """One run: exit status, captured streams (clipped), and the harness's result file."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    result: JSON = None


class CodeRunner(Protocol):
    #: what confines the code, reported in the grade's details: `bwrap`, or `off` when the
    #: user opted out of the sandbox
    isolation: str

    def run_python(
        self, files: Mapping[str, str], entry: str, stdin: str, limits: SandboxLimits
    ) -> SandboxRun:
        """Write `files` into a fresh scratch directory and run `python entry` there."""
        ...


def harness_source(function_name: str) -> str:
    """The script that loads the solution, calls the function once and writes the result."""
    return f"""\
import importlib.util, json, sys, traceback

case = json.load(sys.stdin)
out = {{}}
try:
    spec = importlib.util.spec_from_file_location("solution", {SOLUTION_FILE!r})
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = getattr(module, {function_name!r})
except BaseException as exc:
    out = {{"phase": "load", "error": type(exc).__name__, "message": str(exc)[:2000]}}
else:
    try:
        value = function(*case["args"], **case["kwargs"])
    except BaseException as exc:
        out = {{"phase": "call", "error": type(exc).__name__, "message": str(exc)[:2000]}}
    else:
        try:
            json.dumps(value)
            out = {{"phase": "done", "value": value}}
        except (TypeError, ValueError):
            out = {{"phase": "done", "value": repr(value), "not_json": True}}
with open({RESULT_FILE!r}, "w") as handle:
    json.dump(out, handle)
"""


def _as_json(value: JSON) -> JSON:
    return json.loads(json.dumps(value))


def compare(case: FunctionTestCase, value: JSON) -> bool:
    expected = _as_json(case.expected)
    if case.comparator == "equals":
        return bool(value == expected)
    if case.comparator == "approx":
        if isinstance(value, int | float) and isinstance(expected, int | float):
            return math.isclose(value, expected, rel_tol=case.tolerance, abs_tol=case.tolerance)
        return bool(value == expected)
    if case.comparator == "contains":
        if isinstance(value, str) and isinstance(expected, str):
            return expected in value
        return isinstance(value, list) and expected in value
    if case.comparator == "unordered":
        if not isinstance(value, list) or not isinstance(expected, list):
            return False
        return Counter(map(_key, value)) == Counter(map(_key, expected))
    return False  # `raises` is decided from the error, not from a value


def _key(value: JSON) -> str:
    return json.dumps(value, sort_keys=True)


def _case_result(index: int, case: FunctionTestCase, run: SandboxRun) -> dict[str, JSON]:
    out: dict[str, JSON] = {"case": index, "expected": case.expected}
    result = run.result if isinstance(run.result, dict) else None
    if run.timed_out:
        return out | {"passed": False, "error": "timeout"}
    if result is None:
        reason = f"exit status {run.returncode}" if run.returncode else "no result written"
        return out | {"passed": False, "error": f"{reason}: {run.stderr[-500:]}".strip()}
    if result.get("phase") != "done":
        error = f"{result.get('error')}: {result.get('message', '')}"
        if case.comparator == "raises" and result.get("phase") == "call":
            passed = result.get("error") == case.expected
            return out | {"passed": passed, "raised": result.get("error"), "error": error}
        return out | {"passed": False, "error": error}
    value = result.get("value")
    if result.get("not_json"):
        return out | {"passed": False, "output": value, "error": "result is not JSON data"}
    if case.comparator == "raises":
        return out | {"passed": False, "output": value, "error": "no exception raised"}
    return out | {"passed": compare(case, value), "output": value}


def grade_function_output(
    code: str,
    config: FunctionOutputConfig,
    runner: CodeRunner,
    test_cases: list[FunctionTestCase] | None = None,
) -> GradeResult:
    """Run every test case in its own sandboxed process; `score` = share of cases passed."""
    cases = test_cases if test_cases is not None else config.test_cases
    if not cases:
        return GradeResult.errored("function_output needs at least one test case")
    files = {SOLUTION_FILE: code, HARNESS_FILE: harness_source(config.function_name)}
    limits = config.limits()
    results: list[dict[str, JSON]] = []
    for index, case in enumerate(cases):
        stdin = json.dumps({"args": case.args, "kwargs": case.kwargs})
        try:
            run = runner.run_python(files, HARNESS_FILE, stdin, limits)
        except OSError as exc:
            return GradeResult.errored(
                f"the sandbox could not run case {index}: {exc}", sandbox=runner.isolation
            )
        results.append(_case_result(index, case, run))
    passed = sum(1 for r in results if r["passed"])
    return GradeResult(
        passed=passed == len(results),
        score=passed / len(results),
        details={
            "test_results": results,
            "passed_count": passed,
            "total_count": len(results),
            "sandbox": runner.isolation,
        },
    )
