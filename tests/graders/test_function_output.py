"""function_output through the real subprocess sandbox: per-case results, timeouts, CPU and
memory limits, the scratch directory, and no network."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from evalstream.assertions.graders import FunctionOutputConfig, grade_function_output
from evalstream.assertions.graders.function_output import HARNESS_FILE, SandboxLimits
from evalstream.connectors.sandboxing.limited_subprocess import (
    SubprocessSandbox,
    detect_network_isolation,
)

JSON = Any

FACTORIAL = """
def factorial(n):
    return 1 if n <= 1 else n * factorial(n - 1)
"""

SANDBOX = SubprocessSandbox()


def config(**overrides: JSON) -> FunctionOutputConfig:
    data: dict[str, JSON] = {
        "function_name": "factorial",
        "timeout_per_case": 5,
        "test_cases": [
            {"input": [5], "output": 120},
            {"input": [0], "output": 1},
            {"args": [10], "expected": 3628800, "comparator": "equals"},
        ],
    }
    data.update(overrides)
    return FunctionOutputConfig.model_validate(data)


def test_correct_code_passes_every_case() -> None:
    result = grade_function_output(FACTORIAL, config(), SANDBOX)
    assert result.status == "pass"
    assert result.details["passed_count"] == 3
    assert [r["output"] for r in result.details["test_results"]] == [120, 1, 3628800]


def test_wrong_code_reports_per_case_results() -> None:
    off_by_one = (
        "def factorial(n):\n    return 0 if n == 0 else n * factorial(n - 1) if n > 1 else 1\n"
    )
    result = grade_function_output(off_by_one, config(), SANDBOX)
    assert result.status == "fail"
    assert result.score == pytest.approx(2 / 3)
    cases = result.details["test_results"]
    assert [c["passed"] for c in cases] == [True, False, True]
    assert cases[1] == {"case": 1, "expected": 1, "passed": False, "output": 0}


def test_exceptions_syntax_errors_and_missing_function_fail() -> None:
    raising = grade_function_output(
        "def factorial(n):\n    raise ValueError('no')\n", config(), SANDBOX
    )
    assert raising.details["test_results"][0]["error"] == "ValueError: no"
    broken = grade_function_output("def factorial(n) return n", config(), SANDBOX)
    assert broken.status == "fail"
    assert broken.details["test_results"][0]["error"].startswith("SyntaxError")
    missing = grade_function_output("def other(n):\n    return n\n", config(), SANDBOX)
    assert missing.details["test_results"][0]["error"].startswith("AttributeError")


def test_comparators() -> None:
    code = """
def solve(x):
    if x == "raise":
        raise KeyError(x)
    return {"pi": 3.14159265, "list": [3, 1, 2], "text": "hello world"}[x]
"""
    cases = [
        {"args": ["pi"], "expected": 3.1416, "comparator": "approx", "tolerance": 1e-4},
        {"args": ["list"], "expected": [1, 2, 3], "comparator": "unordered"},
        {"args": ["list"], "expected": 2, "comparator": "contains"},
        {"args": ["text"], "expected": "world", "comparator": "contains"},
        {"args": ["raise"], "expected": "KeyError", "comparator": "raises"},
        {"args": ["list"], "expected": [1, 2, 3], "comparator": "equals"},
    ]
    result = grade_function_output(code, config(function_name="solve", test_cases=cases), SANDBOX)
    assert [c["passed"] for c in result.details["test_results"]] == [True] * 5 + [False]


def test_wall_clock_timeout_fails_the_case_only() -> None:
    code = """
import time
def factorial(n):
    if n == 5:
        time.sleep(30)
    return 1
"""
    result = grade_function_output(code, config(timeout_per_case=1), SANDBOX)
    cases = result.details["test_results"]
    assert cases[0]["error"] == "timeout"
    assert cases[1]["passed"] is True


def test_cpu_limit_stops_a_busy_loop() -> None:
    code = "def factorial(n):\n    while True:\n        pass\n"
    limits_cfg = config(
        timeout_per_case=20, cpu_seconds=1, test_cases=[{"args": [1], "expected": 1}]
    )
    result = grade_function_output(code, limits_cfg, SANDBOX)
    assert result.details["test_results"][0]["error"] == "timeout"


def test_memory_limit() -> None:
    code = "def factorial(n):\n    block = bytearray(400 * 1024 * 1024)\n    return len(block)\n"
    cfg = config(memory_mb=128, test_cases=[{"args": [1], "expected": 400 * 1024 * 1024}])
    result = grade_function_output(code, cfg, SANDBOX)
    assert result.details["test_results"][0]["error"].startswith("MemoryError")


def test_scratch_directory_is_fresh_and_private() -> None:
    code = """
import os
def factorial(n):
    with open("left-behind.txt", "a") as f:
        f.write("x")
    return [sorted(os.listdir(".")), os.environ.get("HOME") == os.getcwd()]
"""
    cases = [{"args": [1], "expected": None}, {"args": [2], "expected": None}]
    result = grade_function_output(code, config(test_cases=cases), SANDBOX)
    listings = [c["output"] for c in result.details["test_results"]]
    # each case starts in a new directory: the file written by the first is gone
    assert listings[0] == listings[1]
    assert listings[0][0] == ["harness.py", "left-behind.txt", "solution.py"]
    assert listings[0][1] is True


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        yield int(server.getsockname()[1])
    finally:
        server.close()


CONNECT = """
import socket
def factorial(port):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        return "connected"
    except OSError as exc:
        return type(exc).__name__
"""


@pytest.mark.skipif(detect_network_isolation() == "none", reason="no network namespaces here")
def test_network_is_unreachable_in_the_sandbox(listener: int) -> None:
    cases = [{"args": [listener], "expected": "connected"}]
    result = grade_function_output(CONNECT, config(test_cases=cases), SANDBOX)
    [case] = result.details["test_results"]
    assert case["passed"] is False
    assert case["output"] != "connected"
    # the same code without isolation does connect: the test above can fail
    open_box = SubprocessSandbox(network="none")
    [case] = grade_function_output(CONNECT, config(test_cases=cases), open_box).details[
        "test_results"
    ]
    assert case["output"] == "connected"


def test_no_test_cases_is_an_error() -> None:
    result = grade_function_output(FACTORIAL, config(test_cases=[]), SANDBOX)
    assert result.status == "error"


def test_a_runner_that_cannot_start_is_an_error_not_a_fail() -> None:
    missing_python = SubprocessSandbox("/nonexistent/python", network="none")
    result = grade_function_output(FACTORIAL, config(), missing_python)
    assert result.status == "error"


def test_files_cannot_escape_the_scratch_directory() -> None:
    with pytest.raises(OSError, match="outside the scratch dir"):
        SANDBOX.run_python(
            {"../escape.py": "x = 1", HARNESS_FILE: ""},
            HARNESS_FILE,
            "{}",
            SandboxLimits(timeout_s=1, cpu_seconds=1, memory_mb=64),
        )
