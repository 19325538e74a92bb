#!/usr/bin/env python3
"""Start-up cost per graded case: the bubblewrap sandbox against the plain limited subprocess.

    PYTHONPATH=. .venv/bin/python bench/sandbox_bench.py [--rounds 40]

Each round grades the same one-case `function_output` item (a trivial function) once through
`SubprocessSandbox` (the opted-out runner) and once through `BwrapSandbox`, in alternating
order, so both see the same machine load. Prints the median and 90th percentile wall time
per case for each runner and the median of the per-round differences (paired).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

from evalstream.assertions.graders.function_output import (
    CodeRunner,
    FunctionOutputConfig,
    grade_function_output,
)
from evalstream.connectors.sandboxing.bwrap import BwrapSandbox
from evalstream.connectors.sandboxing.limited_subprocess import SubprocessSandbox
from evalstream.connectors.sandboxing.pids_cgroup import pids_parent

CODE = "def double(x):\n    return 2 * x\n"
CONFIG = FunctionOutputConfig(
    function_name="double", test_cases=[{"args": [21], "expected": 42}], timeout_per_case=10
)


def one_case(runner: CodeRunner) -> float:
    started = time.perf_counter()
    result = grade_function_output(CODE, CONFIG, runner)
    elapsed = time.perf_counter() - started
    if not result.passed:
        raise SystemExit(f"the benchmark case failed under {runner.isolation}: {result}")
    return elapsed


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    runners: dict[str, CodeRunner] = {"subprocess": SubprocessSandbox(), "bwrap": BwrapSandbox()}
    for runner in runners.values():  # warm-up: page cache, probes
        one_case(runner)
    times: dict[str, list[float]] = {name: [] for name in runners}
    for index in range(args.rounds):
        order = list(runners) if index % 2 == 0 else list(reversed(runners))
        for name in order:
            times[name].append(one_case(runners[name]))
    diffs = [b - s for b, s in zip(times["bwrap"], times["subprocess"], strict=True)]
    print(f"python {platform.python_version()}, {platform.machine()}, {args.rounds} rounds")
    print(f"process bound of the bwrap runs: {'pids cgroup' if pids_parent() else 'RLIMIT_NPROC'}")
    print("| runner | median ms per case | p90 ms |")
    print("|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values) * 1000
        print(f"| {name} | {median:.1f} | {percentile(values, 0.9) * 1000:.1f} |")
    print(
        f"\npaired difference bwrap - subprocess, median: {statistics.median(diffs) * 1000:.1f} ms"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
