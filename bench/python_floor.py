#!/usr/bin/env python3
"""The least any CPython scorer spends on a file of store episodes, before its own logic.

    .venv/bin/python bench/python_floor.py FILE [--rounds 3] [--air-seconds S] [--cores 2]

FILE is a JSON array of store episodes (`bench/air_compare.py --keep DIR` writes
DIR/episodes.json). Measured, each the median of `--rounds`, in this process:

- start-up: a bare `python -c pass` (a fresh interpreter);
- parse: `orjson.loads` of the whole file;
- read: every field the store's step schema has, read once per step (`dict.get`), and each
  step's RFC 3339 timestamp parsed (`datetime.fromisoformat`): what validating a step costs
  at the least, with no check made;
- render: one `orjson.dumps` per episode of a record of the size a results file holds (the
  episode's own object, indented).

The sum is a floor: no validation, scoring, baseline, regression window or merge is in it.
With `--air-seconds` (AIR's wall time on the same file, from `air_compare.py`) it also
prints the wall budget of a scorer 3x faster than AIR on `--cores` cores, the floor's share
of it with all of the floor but start-up split perfectly across the cores (generous: a JSON
array is not split before it is scanned), and the CPU left per step for everything else.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

EPISODE_FIELDS = ("episode_id", "agent_id", "status", "steps", "metadata", "started_at")
STEP_FIELDS = (
    "step_index",
    "step_type",
    "tool_name",
    "model",
    "provider",
    "tokens",
    "cost_usd",
    "duration_ms",
    "timestamp",
    "error",
)


def _read_every_field(episodes: list[dict[str, Any]]) -> int:
    steps = 0
    for episode in episodes:
        get = episode.get
        for key in EPISODE_FIELDS:
            get(key)
        for step in episode["steps"]:
            step_get = step.get
            for key in STEP_FIELDS:
                step_get(key)
            datetime.fromisoformat(step["timestamp"])
            steps += 1
    return steps


def _render(episodes: list[dict[str, Any]]) -> int:
    return sum(len(orjson.dumps(e, option=orjson.OPT_INDENT_2)) for e in episodes)


def _median_seconds(rounds: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("file", help="a JSON array of store episodes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--air-seconds", type=float, help="AIR's wall time on the same file")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args(argv)
    data = Path(args.file).read_bytes()
    episodes: list[dict[str, Any]] = orjson.loads(data)
    steps = _read_every_field(episodes)
    start = _median_seconds(
        args.rounds, lambda: subprocess.run([sys.executable, "-c", "pass"], check=True)
    )
    parse = _median_seconds(args.rounds, lambda: orjson.loads(data))
    read = _median_seconds(args.rounds, lambda: _read_every_field(episodes))
    render = _median_seconds(args.rounds, lambda: _render(episodes))
    total = start + parse + read + render
    print(
        f"{len(episodes):,} episodes, {steps:,} steps, {len(data) / 1e6:.1f} MB "
        f"({args.rounds} rounds, medians)"
    )
    for name, seconds in (
        ("start-up", start),
        ("parse", parse),
        ("read every field", read),
        ("render", render),
    ):
        print(f"  {name:<17} {seconds:7.3f} s  {seconds / len(episodes) * 1e6:6.1f} µs/episode")
    print(f"  {'floor, one core':<17} {total:7.3f} s")
    if args.air_seconds:
        budget = args.air_seconds / 3
        split = start + (parse + read + render) / args.cores
        print(
            f"3x AIR ({args.air_seconds:.2f} s) allows {budget:.3f} s wall; the floor on "
            f"{args.cores} cores is {split:.3f} s ({split / budget:.0%} of it), leaving "
            f"{max(0.0, budget - split) * args.cores:.3f} CPU-s for validation and scoring "
            f"({max(0.0, budget - split) * args.cores / steps * 1e6:.2f} µs per step)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
