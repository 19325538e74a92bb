#!/usr/bin/env python3
"""Machine instructions per scored episode, counted by valgrind (a/b).

    .venv/bin/python bench/scoring_instructions.py [--episodes 2000]

The timing benchmark (`bench/scoring_bench.py`) runs on a virtual machine whose speed
drifts by up to 2x within minutes (its empty-call yardstick reads 25-48 ns), which hides
changes of 10 %. This counts instructions instead: the same (a) loop as the timing
benchmark (baseline lookup, `score_episode`, `AlertRules.evaluate`, `episode_passes`) runs
under `valgrind --tool=cachegrind` once with 0 and once with 2 passes over `--episodes`
episodes after a warm-up pass; the difference over 2 x episodes is the count per episode,
start-up and workload generation excluded. Deterministic (PYTHONHASHSEED=0) to a few
instructions; it says nothing of cache misses or branch mispredictions. Needs valgrind
(`apt-get install valgrind`); a run takes about two minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

WORKLOADS = ((10, 0.05), (10, 1.0), (50, 0.05), (50, 1.0))
PASSES = 2
REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _child(episodes: int, steps: int, regressed: float, passes: int) -> None:
    """Runs under valgrind: a warm-up pass, then `passes` passes of the (a) loop."""
    sys.path.insert(0, str(Path(__file__).parent))
    import scoring_bench  # noqa: PLC0415 - the child imports only what it measures

    from evalstream.assertions.alerting.alert_rules import AlertRules  # noqa: PLC0415
    from evalstream.assertions.scores.dimensions import ScoringConfig  # noqa: PLC0415

    config, rules = ScoringConfig(), AlertRules()
    work = scoring_bench.make_workload(episodes, steps, regressed=regressed)
    for _ in range(1 + passes):
        scoring_bench.score_and_alert(work, config, rules)


def _count(episodes: int, steps: int, regressed: float, passes: int) -> int:
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--child",
        str(episodes),
        str(steps),
        str(regressed),
        str(passes),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    found = REFS.search(done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        episodes, steps, regressed, passes = args.child
        _child(int(episodes), int(steps), float(regressed), int(passes))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind not found: apt-get install valgrind", file=sys.stderr)
        return 2
    print("| steps | traffic | instructions per episode |")
    print("|---|---|---|")
    for steps, regressed in WORKLOADS:
        base = _count(args.episodes, steps, regressed, 0)
        more = _count(args.episodes, steps, regressed, PASSES)
        per_episode = (more - base) / (PASSES * args.episodes)
        traffic = "all regressed" if regressed == 1.0 else "steady (5 % regressed)"
        print(f"| {steps} | {traffic} | {per_episode:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
