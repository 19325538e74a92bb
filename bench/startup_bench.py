#!/usr/bin/env python3
"""Start-up time of the `evalstream` command line: each command in a fresh process.

    .venv/bin/python bench/startup_bench.py [--runs 15] [--warmup 2] [--baseline DIR]
    .venv/bin/python bench/startup_bench.py --write-inputs DIR   # the inputs, for hyperfine

Times, from process start to exit, `evalstream --help`, `check --help`, `check` on a tiny
recording (the first episode of examples/code-review) and `score --no-baseline` on a tiny
episode-store export (one episode, NDJSON). The commands run in turn within each round, so a
burst of load on a shared machine spreads over all of them instead of skewing one. Prints
the median, the quartiles and the minimum of each, in milliseconds, as Markdown tables: the
wall time, and the CPU time (user + system) of the process, which a busy machine inflates
less.

The console script is run as `python -c "from evalstream.stream.cli import main; main()"` (its
older name in a tree from before the move under `evalstream/`), with the interpreter running
this script and the project this script belongs to first on PYTHONPATH.
`--baseline DIR` names another checkout of the project (e.g. `git archive` of an older
commit): each round then runs every command in both, alternately first, so that both see the
same machine, and the table gains the baseline's medians and the ratio. Bytecode caching is
on whatever the environment says (the warm-up rounds write __pycache__), as for an installed
project, and ANTHROPIC_API_KEY is unset.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tree_entry import cli_entry

ROOT = Path(__file__).resolve().parents[1]
RECORDING_SOURCE = ROOT / "examples" / "code-review" / "episodes.jsonl"
SUITE = ROOT / "examples" / "code-review" / "suite.yaml"


def tiny_recording(path: Path) -> None:
    """The signals of the first episode of the code-review example."""
    lines = RECORDING_SOURCE.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])["episode_id"]
    kept = [line for line in lines if json.loads(line)["episode_id"] == first]
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")


def tiny_store_export(path: Path) -> None:
    """One finished episode in the episode store's NDJSON export shape."""

    def step(index: int, kind: str, at: str, **fields: object) -> dict[str, object]:
        return {"step_index": index, "step_type": kind, "timestamp": at, **fields}

    episode = {
        "episode_id": "startup-1",
        "agent_id": "support-bot",
        "status": "success",
        "started_at": "2026-01-01T00:00:00.000Z",
        "ended_at": "2026-01-01T00:00:04.000Z",
        "metadata": {"case_id": "refund"},
        "steps": [
            step(0, "llm_call", "2026-01-01T00:00:00.000Z", model="gpt-4o", provider="openai",
                 tokens=500, cost_usd=0.02, duration_ms=100, output_summary="calling tools"),
            step(1, "tool_call", "2026-01-01T00:00:00.100Z", tool_name="refund",
                 input_summary="{}", duration_ms=50),
            step(2, "tool_result", "2026-01-01T00:00:00.150Z", tool_name="refund",
                 output_summary="ok", duration_ms=0),
            step(3, "llm_call", "2026-01-01T00:00:00.300Z", model="gpt-4o", provider="openai",
                 tokens=100, cost_usd=0.0, duration_ms=100,
                 output_summary="Your refund is on its way."),
        ],
    }  # fmt: skip
    path.write_text(json.dumps(episode) + "\n", encoding="utf-8")


def commands(inputs: Path) -> dict[str, list[str]]:
    return {
        "--help": ["--help"],
        "check --help": ["check", "--help"],
        "check (1 episode)": [
            "check", "-s", str(SUITE), str(inputs / "recording.jsonl"), "-f", "json",
        ],
        "score (1 episode)": [
            "score", "--no-baseline", "--allow-empty", str(inputs / "store.ndjson"),
        ],
    }  # fmt: skip


def write_inputs(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tiny_recording(directory / "recording.jsonl")
    tiny_store_export(directory / "store.ndjson")


def environment(root: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(root), "ANTHROPIC_API_KEY": ""}
    # As installed: the project's bytecode is cached (by the warm-up rounds), like the
    # dependencies' in site-packages; compiling every source each time would dominate.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_once(args: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU milliseconds of `evalstream ARGS`; `cwd` holds neither checkout (`-c`
    puts it first on the path)."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", cli_entry(Path(env["PYTHONPATH"])), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # check exits 1 when an episode fails
        raise SystemExit(f"evalstream {' '.join(args)} exited {done.returncode}:\n{done.stderr!r}")
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return wall * 1000, cpu * 1000


def _spread(samples: list[float], *, least: bool = True) -> str:
    """Median, quartiles (and the minimum) as table cells."""
    q1, median, q3 = statistics.quantiles(samples, n=4)
    cells = [median, q1, q3] + ([min(samples)] if least else [])
    return " | ".join(f"{value:.0f}" for value in cells)


def print_table(this: dict[str, list[float]], baseline: dict[str, list[float]] | None) -> None:
    head = "| command | median | q1 | q3 | min |"
    rule = "|---|---:|---:|---:|---:|"
    if baseline is not None:
        head += " baseline median | baseline q1 | baseline q3 | this / baseline |"
        rule += "---:|---:|---:|---:|"
    print(head)
    print(rule)
    for name, values in this.items():
        row = f"| `{name}` | {_spread(values)} |"
        if baseline is not None:
            ratio = statistics.median(values) / statistics.median(baseline[name])
            row += f" {_spread(baseline[name], least=False)} | {ratio:.2f} |"
        print(row)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="timed rounds")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    parser.add_argument("--write-inputs", type=Path, help="write the inputs here and exit")
    parser.add_argument("--baseline", type=Path, help="another checkout to time alongside")
    opts = parser.parse_args(argv)
    if opts.write_inputs:
        write_inputs(opts.write_inputs)
        return 0
    roots = [ROOT] if opts.baseline is None else [ROOT, opts.baseline.resolve()]
    envs = [environment(root) for root in roots]
    with tempfile.TemporaryDirectory(prefix="evalstream-startup-") as tmp:
        inputs = Path(tmp)
        write_inputs(inputs)
        cases = commands(inputs)
        samples: list[dict[str, list[tuple[float, float]]]] = [
            {name: [] for name in cases} for _ in roots
        ]
        for round_no in range(opts.warmup + opts.runs):
            for name, args in cases.items():
                order = range(len(roots)) if round_no % 2 == 0 else reversed(range(len(roots)))
                for which in order:
                    sample = run_once(args, envs[which], inputs)
                    if round_no >= opts.warmup:
                        samples[which][name].append(sample)
    print(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{opts.runs} runs each; "
        f"this tree: {ROOT}" + (f"; baseline: {roots[1]}" if len(roots) > 1 else "")
    )

    def column(which: int, part: int) -> dict[str, list[float]]:
        return {name: [s[part] for s in runs] for name, runs in samples[which].items()}

    for title, part in (("wall time", 0), ("CPU time", 1)):
        print(f"\n{title}, ms\n")
        print_table(column(0, part), column(1, part) if len(roots) > 1 else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
