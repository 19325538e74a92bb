#!/usr/bin/env python3
"""Benchmark of five-dimension scoring and alert detection.

    .venv/bin/python bench/scoring_bench.py [--episodes 10000] [--repeat 5] [--profile]

Generates deterministic synthetic finished episodes (`ScoringInput`) of 10 and 50 steps —
tool-call sequences with retries and reorderings, agent outputs of realistic length with
order numbers, dates and amounts, and a few with an e-mail address, a card number or a
leaked key; occasional policy violations and error steps — and measures, in-process on one
core (the median CPU time of `--repeat` runs after a warm-up):

  a. scoring plus per-episode alert detection: baseline lookup in a fixed store,
     `score_episode`, `AlertRules.evaluate`, `episode_passes` (target >= 100,000 episodes/s),
     on steady traffic (5 % of the episodes regressed) and on traffic that all regressed;
  b. the same with a rolling production baseline (`get` + `observe` per episode);
  c. continuous (CUSUM) regression detection (`RegressionDetector.observe`), as
     microseconds per episode, on one agent/variant stream whose cost rises 60 % halfway
     through: nothing is tested during the stream's first 250 scored episodes (the warm-up:
     a reference of 150 behind a guard of 100), then the cost alert fires and holds.
     Alerting quality (false firings, delays) is measured by bench/scoring_simulation.py.

`--profile` prints cProfile hot spots of (a) on 50-step episodes.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import math
import os
import platform
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from evalstream import assertions
from evalstream.assertions.alerting.alert_rules import AlertRules, episode_passes, quality_passes
from evalstream.assertions.alerting.regression import (
    Observation,
    RegressionConfig,
    RegressionDetector,
)
from evalstream.assertions.scores.baselines import (
    Baseline,
    BaselineKey,
    FileBaselines,
    RollingBaselines,
)
from evalstream.assertions.scores.dimensions import ScoringConfig, ScoringInput, score_episode

SEED = 20260602
TARGET_EPISODES_PER_S = 100_000.0
AGENTS = tuple(f"agent-{i}" for i in range(10))
CASES = tuple(f"case-{i}" for i in range(20))
TOOLS = ("search", "read_file", "edit_file", "run_tests", "fetch_url", "lookup_order")
WORDS = tuple(
    " ".join(  # prose reads better than a list of words
        (
            "the order was located and the refund has been issued to the original payment",
            "method you should see it within five business days please let me know if there",
            "is anything else I can help with the shipment left our warehouse tracking shows",
            "it in transit summary of changes tests pass the function now handles empty input",
            "and edge cases",
        )
    ).split(" ")
)
PII = (
    "reach me at jane.doe@example.org for details",
    "card on file 4111 1111 1111 1111 was charged",
    "use key sk-ant-api03-" + "x" * 40 + " for the call",
    "account GB82 WEST 1234 5698 7654 32 was credited",
)


@dataclass(frozen=True)
class Workload:
    steps: int
    inputs: list[ScoringInput]
    baselines: FileBaselines


def _output(rng: random.Random, words: int) -> str:
    """Agent prose with an order number, date or amount in one word of ten (never two in a
    row: prose puts words between them)."""
    parts = []
    numeric = False
    for _ in range(words):
        roll = rng.random()
        if numeric or roll >= 0.10:
            parts.append(rng.choice(WORDS))
            numeric = False
            continue
        numeric = True
        if roll < 0.04:
            parts.append(f"#{rng.randint(10_000, 99_999)}")
        elif roll < 0.07:
            parts.append(f"2026-0{rng.randint(1, 9)}-{rng.randint(10, 28)}")
        else:
            parts.append(f"${rng.randint(1, 999)}.{rng.randint(10, 99)}")
    text = " ".join(parts)
    roll = rng.random()
    if roll < 0.03:  # 3 % of outputs carry PII or a secret
        text += " " + PII[rng.randrange(len(PII))]
    return text


def _tools(rng: random.Random, base: Sequence[str]) -> tuple[str, ...]:
    tools = list(base)
    roll = rng.random()
    if roll < 0.10:  # a retry storm
        i = rng.randrange(len(tools))
        tools[i:i] = [tools[i]] * rng.randint(1, 4)
    elif roll < 0.20:  # a swap
        i = rng.randrange(len(tools) - 1)
        tools[i], tools[i + 1] = tools[i + 1], tools[i]
    return tuple(tools)


def make_workload(n: int, steps: int, *, regressed: float = 0.05, seed: int = SEED) -> Workload:
    """n episodes of `steps` steps: about half tool calls, the rest LLM calls; a final
    output of 40 + 2 * steps words (60 words, ~370 characters, at 10 steps; 140 words,
    ~860 characters, at 50). Cost and latency scatter around the baseline (log-normal,
    sigma 0.08 and 0.12); a share `regressed` of the episodes costs 50 % more and takes
    70 % longer (CRITICAL alerts)."""
    rng = random.Random(seed + steps)
    base_tools = {
        (a, c): tuple(rng.choice(TOOLS) for _ in range(max(1, steps // 2)))
        for a in AGENTS
        for c in CASES
    }
    baselines = FileBaselines(
        Baseline(
            key=BaselineKey.of({"agent_id": a, "case_id": c}),
            source="run:bench",
            cost_usd=0.002 * steps,
            latency_ms=400.0 * steps,
            tool_names=tools,
            outcome="success",
            step_count=float(steps),
        )
        for (a, c), tools in base_tools.items()
    )
    inputs = []
    for i in range(n):
        agent, case = rng.choice(AGENTS), rng.choice(CASES)
        roll = rng.random()
        worse = rng.random() < regressed
        inputs.append(
            ScoringInput(
                episode_id=f"ep-{steps}-{i}",
                attrs={"agent_id": agent, "case_id": case, "variant": "default"},
                outcome="success" if roll > 0.05 else "failure",
                step_count=steps + rng.randint(-2, 2),
                cost_usd=0.002 * steps * rng.lognormvariate(0, 0.08) * (1.5 if worse else 1),
                latency_ms=400.0 * steps * rng.lognormvariate(0, 0.12) * (1.7 if worse else 1),
                tool_names=_tools(rng, base_tools[(agent, case)]),
                errors=1 if roll < 0.03 else 0,
                policy_violations={"high": 1} if roll < 0.01 else {},
                output=_output(rng, 40 + 2 * steps),
            )
        )
    return Workload(steps, inputs, baselines)


def score_and_alert(work: Workload, config: ScoringConfig, rules: AlertRules) -> int:
    """(a): returns the number of CRITICAL-failed episodes (so nothing is optimised away)."""
    baseline_for = work.baselines.baseline_for
    failed = 0
    for inp in work.inputs:
        scores = score_episode(inp, baseline_for(inp.attrs), config)
        if not episode_passes(None, rules.evaluate(scores)):
            failed += 1
    return failed


def score_rolling(work: Workload, config: ScoringConfig, rules: AlertRules) -> int:
    """(b): the same against a rolling baseline of the last 20 episodes per key."""
    store = RollingBaselines(20)
    failed = 0
    for inp in work.inputs:
        scores = score_episode(inp, store.baseline_for(inp.attrs), config)
        store.observe(inp)
        if not episode_passes(None, rules.evaluate(scores)):
            failed += 1
    return failed


def windowed(observations: Sequence[Observation], config: RegressionConfig) -> int:
    """(c): every observation through one detector, a minute of event time apart."""
    detector = RegressionDetector(config)
    events = 0
    now = 0.0
    for obs in observations:
        now += 60_000.0
        events += len(detector.observe(obs, now))
    return events


def observations_of(work: Workload, config: ScoringConfig, rules: AlertRules) -> list[Observation]:
    """Scored observations of one agent/variant stream; from the middle on, costs rise 60 %."""
    out = []
    half = len(work.inputs) // 2
    for i, inp in enumerate(work.inputs):
        scores = score_episode(inp, work.baselines.get(work.baselines.key_for(inp.attrs)), config)
        obs = Observation.from_scores(inp, scores, quality_passes(None, rules.evaluate(scores)))
        cost = None if obs.cost_usd is None else obs.cost_usd * (1.6 if i >= half else 1.0)
        out.append(
            Observation(
                agent_id="agent-0",
                variant="default",
                episode_id=obs.episode_id,
                passed=obs.passed,
                latency_ms=obs.latency_ms,
                cost_usd=cost,
                overall=obs.overall,
                correctness=obs.correctness,
                cost=obs.cost,
                tool_match=obs.tool_match,
                latency=obs.latency,
                safety=obs.safety,
            )
        )
    return out


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The median CPU time of this process over `repeat` runs (after a warm-up): on a
    machine shared with other jobs, wall-clock time would mostly measure their load."""
    fn()  # warm-up (compiled patterns, caches)
    times = []
    result: object = None
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
    return statistics.median(times), result


def _noop() -> None:
    return None


def call_cost_ns(calls: int = 1_000_000) -> float:
    """CPU nanoseconds of one call of an empty function: a yardstick of this machine's speed
    at the moment (about 30-50 ns on an idle modern x86 core with Python 3.11)."""
    fn = _noop
    best = math.inf
    for _ in range(3):
        start = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, time.process_time() - start)
    return best / calls * 1e9


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    config, rules = ScoringConfig(), AlertRules()
    regression = RegressionConfig()
    n = args.episodes
    load = os.getloadavg()
    print("## Scoring and alert detection benchmark\n")
    print(
        f"Python {platform.python_version()} on {platform.machine()}, one core; "
        f"{n:,} synthetic episodes per size; median CPU time of {args.repeat} runs after a "
        "warm-up; "
        f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; one empty "
        f"function call costs {call_cost_ns():.0f} ns of CPU now; code from "
        f"`{Path(assertions.__file__).parents[2]}`.\n"
    )
    print(
        "| steps | traffic | (a) score + alerts, episodes/s | µs/episode | target ≥ 100k/s "
        "| CRITICAL episodes | (b) with rolling baseline, episodes/s "
        "| (c) windowed detection, µs/episode | windowed events |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ok = True
    works = {}
    for steps in (10, 50):
        for traffic, share in (("steady (5 % regressed)", 0.05), ("all regressed", 1.0)):
            work = make_workload(n, steps, regressed=share)
            works[(steps, share)] = work
            seconds_a, failed = timed(partial(score_and_alert, work, config, rules), args.repeat)
            seconds_b, _ = timed(partial(score_rolling, work, config, rules), args.repeat)
            observations = observations_of(work, config, rules)
            seconds_c, events = timed(partial(windowed, observations, regression), args.repeat)
            rate_a = n / seconds_a
            ok = ok and rate_a >= TARGET_EPISODES_PER_S
            print(
                f"| {steps} | {traffic} | {rate_a:,.0f} | {seconds_a / n * 1e6:.2f} "
                f"| {'met' if rate_a >= TARGET_EPISODES_PER_S else 'missed'} | {failed:,} "
                f"| {n / seconds_b:,.0f} | {seconds_c / n * 1e6:.2f} | {events} |"
            )
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        score_and_alert(works[(50, 0.05)], config, rules)
        profiler.disable()
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.sort_stats("tottime").print_stats(15)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
