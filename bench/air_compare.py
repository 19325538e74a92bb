#!/usr/bin/env python3
"""`evalstream score` against AIR Blackbox's eval-harness on the same episode-store episodes.

    .venv/bin/python bench/air_compare.py --air /tmp/air-eval-harness [--air-commit SHA]
        [--episodes 20000] [--rounds 3] [--agents 20] [--steps 10] [--keep DIR]
        [--before TREE]

AIR's job: every episode of an agent scored against that agent's baseline run, regressions
checked, the run's results written as JSON. Both tools get the same JSON file of store
episodes (`make_episode` of the scoring tests, with the store's summary fields, which AIR's
scoring reads): per agent one baseline episode (`metadata.run_id` "baseline") and candidates
(run "candidate", 5 % regressed in cost, latency, tools or status). AIR's side is its own
`ScoringEngine` + `RegressionDetector` + `EvalRun` in a child process, as its `run` command
does after fetching (it has no file input); evalstream's is `evalstream score FILE
--baseline-run baseline --output OUT`. Rounds alternate which tool runs first; each run is a
fresh process, measured by `os.wait4` (wall, user+system CPU of it and its worker
processes, the largest process's peak RSS) and by sampling /proc every 20 ms (the peak of
all its processes' RSS together: `score` shards big files across processes).

Prints one line per run with the load average, the medians and the ratios, and a fingerprint
per tool: the SHA-256 of its per-episode results in episode-id order (evalstream: each
`episodes[]` record as sorted-key JSON; AIR: each score card and its alerts). An optimisation
of `evalstream score` must leave evalstream's fingerprint unchanged.

Without `--air` (a checkout of github.com/airblackbox/eval-harness) only evalstream runs.
`--before TREE` (an earlier evalstream exported with `git archive`) runs its `score` in the
same rounds, for paired before/after figures of an optimisation.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tree_entry import cli_entry  # noqa: E402

from tests.scoring.episodes import T0, make_episode  # noqa: E402

SEED = 20260223
BASELINE_RUN = "baseline"
TOOLS = ("search", "lookup", "refund", "notify")


def _with_store_summary(episode: dict[str, Any]) -> dict[str, Any]:
    """The summary fields the store adds to every episode (AIR's scoring reads these)."""
    steps = episode["steps"]
    episode["tools_used"] = [s["tool_name"] for s in steps if s["step_type"] == "tool_call"]
    episode["total_tokens"] = sum(s.get("tokens", 0) for s in steps)
    episode["total_cost_usd"] = sum(s.get("cost_usd", 0.0) for s in steps)
    episode["total_duration_ms"] = sum(s.get("duration_ms", 0) for s in steps)
    episode["step_count"] = len(steps)
    return episode


def make_episodes(n: int, agents: int, steps: int, *, seed: int = SEED) -> Iterator[dict[str, Any]]:
    """`agents` baseline episodes, then `n` candidates spread over the agents."""
    rng = random.Random(seed)
    tool_count = max(0, (steps - 2) // 2)
    tools = tuple(TOOLS[i % len(TOOLS)] for i in range(tool_count))
    for a in range(agents):
        yield (
            _with_store_summary(
                make_episode(
                    f"base-{a:03d}",
                    agent=f"agent-{a:03d}",
                    tools=tools,
                    run_id=BASELINE_RUN,
                    start=T0 + timedelta(seconds=a),
                )
            )
        )
    for i in range(n):
        cost, latency, used, status = 0.02, 4000.0, tools, "success"
        if rng.random() < 0.05:
            kind = rng.randrange(4)
            if kind == 0:
                cost = 0.02 * rng.uniform(1.3, 2.5)
            elif kind == 1:
                latency = 4000.0 * rng.uniform(1.4, 2.2)
            elif kind == 2:
                used = tuple(reversed(tools))
            else:
                status = "failure"
        else:
            cost = 0.02 * rng.uniform(0.9, 1.1)
            latency = 4000.0 * rng.uniform(0.9, 1.1)
        yield (
            _with_store_summary(
                make_episode(
                    f"ep-{i:07d}",
                    agent=f"agent-{i % agents:03d}",
                    cost=round(cost, 6),
                    latency_ms=round(latency, 1),
                    tools=used,
                    status=status,
                    run_id="candidate",
                    start=T0 + timedelta(hours=1, milliseconds=i * 10),
                )
            )
        )


def air_job(air: str, episodes_file: str, output: str) -> int:
    """AIR's eval run over a file: each candidate against its agent's baseline episode."""
    sys.path.insert(0, air)  # AIR is not a dependency: imported from its checkout
    from pkg.models.eval import (  # type: ignore[import-not-found]  # noqa: PLC0415
        EvalConfig,
        EvalResult,
        EvalRun,
        EvalStatus,
    )
    from pkg.regression.detector import (  # type: ignore[import-not-found]  # noqa: PLC0415
        RegressionDetector,
    )
    from pkg.scoring.engine import ScoringEngine  # type: ignore[import-not-found]  # noqa: PLC0415

    with open(episodes_file) as f:
        episodes = json.load(f)
    config = EvalConfig()
    scorer, detector = ScoringEngine(config), RegressionDetector(config)
    run = EvalRun(config=config, status=EvalStatus.RUNNING)
    baselines = {e["agent_id"]: e for e in episodes if e["metadata"].get("run_id") == BASELINE_RUN}
    for episode in episodes:
        if episode["metadata"].get("run_id") == BASELINE_RUN:
            continue
        card = scorer.score(episode, baselines.get(episode["agent_id"]))
        run.results.append(
            EvalResult(
                episode_id=episode["episode_id"],
                agent_id=episode["agent_id"],
                status=EvalStatus.COMPLETED,
                score_card=card,
            )
        )
    detector.check_batch(run.results, run.run_id)
    run.status = EvalStatus.COMPLETED
    run.ended_at = datetime.now(UTC)
    run.compute_summary()
    with open(output, "w") as f:
        json.dump(run.model_dump(mode="json"), f, indent=2, default=str)
    return 0


def _digest(records: list[tuple[str, Any]]) -> str:
    digest = hashlib.sha256()
    for _, record in sorted(records, key=lambda r: r[0]):
        digest.update(json.dumps(record, sort_keys=True).encode() + b"\n")
    return digest.hexdigest()


def fingerprint_evalstream(path: Path) -> tuple[str, int]:
    episodes = json.loads(path.read_bytes())["episodes"]
    return _digest([(e["episode_id"], e) for e in episodes]), len(episodes)


def fingerprint_air(path: Path) -> tuple[str, int]:
    results = json.loads(path.read_bytes())["results"]
    records = []
    for r in results:
        card = dict(r["score_card"])
        alerts = [
            {k: v for k, v in a.items() if k not in ("eval_run_id", "alert_id", "created_at")}
            for a in r["alerts"]
        ]
        records.append((r["episode_id"], {"card": card, "alerts": alerts}))
    return _digest(records), len(results)


@dataclass
class Run:
    tool: str
    wall_s: float
    cpu_s: float
    rss_mb: float  # the largest process's peak
    load: float
    tree_rss_mb: float = 0.0  # the peak of all its processes together (sampled)


def _tree_rss_kb(pid: int) -> int:
    """Resident memory of a process and its descendants (0 once gone)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
            with open(f"/proc/{current}/task/{current}/children") as children:
                todo.extend(int(c) for c in children.read().split())
        except (OSError, ValueError):
            continue
    return total


class _TreeMemory(threading.Thread):
    """Samples a process tree's resident memory every 20 ms; `peak_kb` is the largest sum."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kb = pid, 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            self.peak_kb = max(self.peak_kb, _tree_rss_kb(self.pid))


def measure(tool: str, argv: list[str], tree: Path) -> Run:
    """One fresh process; `tree` is the evalstream it imports (its working directory too, since
    `python -c` puts the working directory first on the path)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as stderr:  # a file, not a pipe: no limit on what it says
        proc = subprocess.Popen(argv, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=stderr)
        sampler = _TreeMemory(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        sampler.stop.set()
        sampler.join()
        stderr.seek(0)
        err = stderr.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # evalstream exits 1 when a regression fired
        raise SystemExit(f"{tool} exited {code}:\n{err[-2000:]}")
    rss = usage.ru_maxrss / 1024
    return Run(tool, wall, usage.ru_utime + usage.ru_stime, rss, load, sampler.peak_kb / 1024)


def _air_commit(air: str) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", air, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown (not a git checkout)"


def summarise(runs: list[Run], names: list[str], work: Path) -> None:
    """Medians, ratios and fingerprints of the rounds."""
    med: dict[str, Run] = {}
    for name in names:
        mine = [x for x in runs if x.tool == name]
        med[name] = Run(
            name,
            statistics.median(x.wall_s for x in mine),
            statistics.median(x.cpu_s for x in mine),
            statistics.median(x.rss_mb for x in mine),
            statistics.median(x.load for x in mine),
            statistics.median(x.tree_rss_mb for x in mine),
        )
        print(
            f"median {name:10} wall {med[name].wall_s:6.2f} s  cpu {med[name].cpu_s:6.2f} s  "
            f"peak RSS {med[name].rss_mb:7.1f} MB, all processes {med[name].tree_rss_mb:7.1f} MB"
            f"  (load {min(x.load for x in mine):.2f}-{max(x.load for x in mine):.2f})"
        )
    if "air" in med:
        e, a = med["evalstream"], med["air"]
        print(
            f"ratio evalstream/AIR: wall {e.wall_s / a.wall_s:.2f}x  cpu {e.cpu_s / a.cpu_s:.2f}x"
            f"  peak RSS {e.rss_mb / a.rss_mb:.2f}x, all processes "
            f"{e.tree_rss_mb / a.tree_rss_mb:.2f}x"
        )
        digest, count = fingerprint_air(work / "air.json")
        print(f"fingerprint AIR        {digest} ({count:,} results)")
    if "before" in med:
        e, b = med["evalstream"], med["before"]
        print(
            f"after/before: wall {e.wall_s / b.wall_s:.2f}x  cpu {e.cpu_s / b.cpu_s:.2f}x"
            f"  peak RSS {e.rss_mb / b.rss_mb:.2f}x"
        )
        digest, count = fingerprint_evalstream(work / "before.json")
        print(f"fingerprint before     {digest} ({count:,} results)")
    digest, count = fingerprint_evalstream(work / "evalstream.json")
    print(f"fingerprint evalstream {digest} ({count:,} results)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--air", help="checkout of github.com/airblackbox/eval-harness")
    parser.add_argument("--air-commit", help="AIR's commit when --air is an exported tree")
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", help="write the episodes and results here (kept)")
    parser.add_argument(
        "--before",
        help="an earlier evalstream tree (git archive): its `score` runs too, for before/after",
    )
    parser.add_argument("--air-job", nargs=3, help=argparse.SUPPRESS)  # AIR PATH, FILE, OUT
    args = parser.parse_args(argv)
    if args.air_job:
        return air_job(*args.air_job)

    work = Path(args.keep or tempfile.mkdtemp(prefix="air-compare-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    episodes_file = work / "episodes.json"
    shape = f"{args.episodes} {args.agents} {args.steps} {SEED}"
    made = work / "episodes.shape"  # a kept file of the same shape is used again
    if not (episodes_file.exists() and made.exists() and made.read_text() == shape):
        with episodes_file.open("w") as out:  # written an episode at a time: 1M is 1.4 GB
            out.write("[")
            for i, episode in enumerate(make_episodes(args.episodes, args.agents, args.steps)):
                out.write((", " if i else "") + json.dumps(episode))
            out.write("]")
        made.write_text(shape)
    print(
        f"{args.episodes + args.agents:,} store episodes ({args.episodes:,} candidates, "
        f"{args.agents} baselines, {args.steps} steps), "
        f"{episodes_file.stat().st_size / 1e6:.1f} MB JSON"
    )

    def score_argv(out: Path, root: Path) -> list[str]:
        return [
            sys.executable,
            "-c",
            cli_entry(root),
            "score",
            str(episodes_file),
            "--baseline-run",
            BASELINE_RUN,
            "--output",
            str(out),
        ]

    tools: dict[str, tuple[list[str], Path]] = {
        "evalstream": (score_argv(work / "evalstream.json", ROOT), ROOT)
    }
    if args.before:
        before = Path(args.before).resolve()
        tools["before"] = (score_argv(work / "before.json", before), before)
    if args.air:
        if not (Path(args.air) / "pkg" / "scoring" / "engine.py").is_file():
            raise SystemExit(
                f"--air {args.air}: no pkg/scoring/engine.py; pass a checkout of "
                "github.com/airblackbox/eval-harness"
            )
        air_argv = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--air-job",
            args.air,
            str(episodes_file),
            str(work / "air.json"),
        ]
        tools["air"] = (air_argv, ROOT)
        print(f"AIR eval-harness {args.air_commit or _air_commit(args.air)}")
    else:
        print("no --air checkout of airblackbox/eval-harness given: evalstream alone, no ratio")

    runs: list[Run] = []
    names = list(tools)
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            run = measure(name, *tools[name])
            runs.append(run)
            print(
                f"round {r + 1} {name:10} wall {run.wall_s:6.2f} s  cpu {run.cpu_s:6.2f} s  "
                f"peak RSS {run.rss_mb:7.1f} MB, all processes {run.tree_rss_mb:7.1f} MB  "
                f"load {run.load:.2f}",
                flush=True,
            )

    summarise(runs, names, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
