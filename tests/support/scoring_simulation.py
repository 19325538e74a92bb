"""Seeded traffic simulation of regression alerting through the `evalstream score` path.

    PYTHONPATH=. .venv/bin/python bench/scoring_simulation.py [--seeds 10] [--quiet-episodes 6000]
        [--only quiet|shifts] [--regression '{"pass_rate_arl0": 20000}']

Generates episode-store episodes (the store's JSON shape) for several agents and variants
interleaved at random — cost and latency lognormal with spread `sigma`, a share of failed
episodes — with step or gradual shifts of cost, latency or the failure rate on one
agent/variant stream, optionally followed by a recovery. They are written to an NDJSON file
and scored by `evalstream.stream.score_sweep.score_episodes`, the function `evalstream score FILES`
runs (rolling per-key baselines, per-episode alert rules, the continuous detector), and its
alert events are measured per stream:

- false firings per 10,000 unchanged scored episodes (after the 250 of warm-up), on streams
  and metrics without a shift and on the shifted stream before its shift;
- detection delay: the episodes of the shifted stream from the shift's first one to the one
  whose scoring fired the shifted metric (1 = the first shifted episode fired it);
- resolution: the episodes after the recovery until the alert resolved (`recovered`);
- events per regression: FIRING, UPDATED and RESOLVED events of the shifted metric.

The pass rate the detector monitors is the episodes' quality outcome (`quality_passes`: a
failed episode does not pass; a CRITICAL per-episode cost or latency alert does not count),
so a failure rate `failures` is a pass rate of 1 - `failures` at every `sigma`. Run as a
script it prints the table
of docs/scoring.md (`bench/scoring_simulation.py` runs it);
tests/unit/test_scoring_simulation.py asserts the targets with it.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from evalstream.assertions.alerting.regression import (
    COST,
    LATENCY_P95,
    PASS_RATE,
    AlertEvent,
    AlertState,
)
from evalstream.stream.score_sweep import ScoreSettings, score_episodes

JSON = Any
WARMUP = 250  # scored episodes per stream before its detector tests (reference + guard)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
TICK_S = 20.0  # seconds between two episodes of the whole traffic
CASES = ("refund", "shipping")
METRIC_OF = {"cost": COST, "latency": LATENCY_P95, "failures": PASS_RATE}


@dataclass(frozen=True, slots=True)
class Shift:
    """A change of one stream from its `start`-th episode (0-based, warm-up included):
    cost or latency multiplied by `to`, or the failure rate set to `to`; reached linearly
    over `ramp` episodes (0: a step); back to normal from episode `end` (None: never)."""

    what: str  # "cost", "latency" or "failures"
    to: float
    start: int = 400
    ramp: int = 0
    end: int | None = None

    @property
    def metric(self) -> str:
        return METRIC_OF[self.what]

    def weight(self, index: int) -> float:
        """How much of the shift applies to the stream's `index`-th episode (0..1)."""
        if index < self.start or (self.end is not None and index >= self.end):
            return 0.0
        if self.ramp <= 0:
            return 1.0
        return min(1.0, (index - self.start + 1) / self.ramp)


@dataclass(frozen=True, slots=True)
class Stream:
    agent: str
    variant: str
    cost_usd: float
    latency_ms: float

    @property
    def key(self) -> tuple[str, str]:
        return self.agent, self.variant


def default_streams() -> tuple[Stream, ...]:
    """Three agents at different levels, two variants each."""
    return tuple(
        Stream(agent, variant, cost, latency)
        for agent, cost, latency in (
            ("support-bot", 0.02, 4000.0),
            ("coder", 0.30, 45000.0),
            ("triage", 0.002, 900.0),
        )
        for variant in ("A", "B")
    )


@dataclass(frozen=True, slots=True)
class Scenario:
    """`episodes` per stream; `shifts` by stream key (agent, variant)."""

    name: str
    sigma: float
    failures: float
    episodes: int
    streams: tuple[Stream, ...] = field(default_factory=default_streams)
    shifts: tuple[tuple[tuple[str, str], Shift], ...] = ()

    def shift_of(self, key: tuple[str, str]) -> Shift | None:
        return dict(self.shifts).get(key)


@dataclass(frozen=True, slots=True)
class Traffic:
    episodes: list[dict[str, JSON]]
    # (agent, variant, end ms) -> the episode's index in its stream
    index_at: dict[tuple[str, str, int], int]


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def store_episode(
    episode_id: str,
    *,
    stream: Stream,
    start: datetime,
    cost: float,
    latency_ms: float,
    status: str,
    case_id: str,
) -> dict[str, JSON]:
    """An LLM call costing `cost`, one tool call and result, a free final LLM call; the
    episode lasts `latency_ms` (a whole number of ms) from start to end."""
    steps: list[tuple[str, dict[str, JSON]]] = [
        ("llm_call", {"model": "gpt-4o", "provider": "openai", "tokens": 500, "cost_usd": cost}),
        ("tool_call", {"tool_name": "search", "input_summary": "{}"}),
        ("tool_result", {"tool_name": "search", "output_summary": "ok"}),
        ("llm_call", {"model": "gpt-4o", "provider": "openai", "tokens": 100, "cost_usd": 0.0}),
    ]
    span = latency_ms / (len(steps) + 1)
    return {
        "episode_id": episode_id,
        "agent_id": stream.agent,
        "status": status,
        "steps": [
            {
                "step_index": i,
                "step_type": kind,
                "duration_ms": 0,
                "timestamp": _iso(start + timedelta(milliseconds=span * (i + 1))),
                "output_summary": "done",
                **fields,
            }
            for i, (kind, fields) in enumerate(steps)
        ],
        "started_at": _iso(start),
        "ended_at": _iso(start + timedelta(milliseconds=latency_ms)),
        "metadata": {"variant": stream.variant, "case_id": case_id},
    }


def generate(scenario: Scenario, seed: int) -> Traffic:
    """The scenario's episodes, streams interleaved at random, one every TICK_S seconds."""
    rng = random.Random(seed)
    order = [s for s in scenario.streams for _ in range(scenario.episodes)]
    rng.shuffle(order)
    counts: dict[tuple[str, str], int] = {}
    episodes = []
    index_at: dict[tuple[str, str, int], int] = {}
    sigma = scenario.sigma
    for n, stream in enumerate(order):
        index = counts.get(stream.key, 0)
        counts[stream.key] = index + 1
        cost, latency, fail = stream.cost_usd, stream.latency_ms, scenario.failures
        shift = scenario.shift_of(stream.key)
        if shift is not None:
            w = shift.weight(index)
            if shift.what == "cost":
                cost *= 1.0 + (shift.to - 1.0) * w
            elif shift.what == "latency":
                latency *= 1.0 + (shift.to - 1.0) * w
            else:
                fail += (shift.to - fail) * w
        cost = round(cost * math.exp(rng.gauss(0.0, sigma)), 9)
        latency = float(max(1, round(latency * math.exp(rng.gauss(0.0, sigma)))))
        status = "failure" if rng.random() < fail else "success"
        start = T0 + timedelta(seconds=n * TICK_S)
        episode_id = f"{stream.agent}-{stream.variant}-{index}"
        case_id = rng.choice(CASES)
        episodes.append(
            store_episode(
                episode_id,
                stream=stream,
                start=start,
                cost=cost,
                latency_ms=latency,
                status=status,
                case_id=case_id,
            )
        )
        end_ms = round((start.timestamp() * 1000.0) + latency)
        index_at[(stream.agent, stream.variant, end_ms)] = index
    return Traffic(episodes, index_at)


def score_traffic(traffic: Traffic, regression: dict[str, JSON] | None = None) -> list[AlertEvent]:
    """The alert events of `evalstream score FILE` over the traffic (written as NDJSON)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "episodes.ndjson"
        path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in traffic.episodes))
        settings = ScoreSettings.build({"files": [str(path)], "regression": regression or {}})
        run = asyncio.run(score_episodes(settings, now=T0 + timedelta(days=365)))
    if run.rejected:
        raise RuntimeError(f"generated episodes rejected: {run.rejected[0].message}")
    return run.regressions


@dataclass(frozen=True, slots=True)
class Outcome:
    """One scenario run, measured per stream."""

    false_firings: int
    false_metrics: list[str]  # the metric of each false firing
    unchanged: int  # scored episodes after warm-up without a shift in force, per metric set
    delay: int | None  # None: a shift that was not detected (or no shift)
    resolved_after: int | None  # episodes after the recovery until RESOLVED
    events: int  # events of the shifted metric on the shifted stream
    collateral: list[str]  # other metrics that fired on the shifted stream after its shift


def measure(scenario: Scenario, traffic: Traffic, events: Sequence[AlertEvent]) -> Outcome:
    """Count false firings, the detection delay, resolution and events (see the module doc)."""

    def index_of(e: AlertEvent) -> int:
        return traffic.index_at[(e.agent_id, e.variant, round(e.at))]

    false_metrics: list[str] = []
    unchanged = 0
    delay = resolved_after = None
    count = 0
    collateral = []
    for stream in scenario.streams:
        shift = scenario.shift_of(stream.key)
        quiet_until = scenario.episodes if shift is None else shift.start
        unchanged += max(0, quiet_until - WARMUP)
        mine = [e for e in events if (e.agent_id, e.variant) == stream.key]
        for e in mine:
            if e.state is not AlertState.FIRING:
                continue
            at = index_of(e)
            if at < quiet_until:
                false_metrics.append(e.metric)
            elif shift is not None and e.metric != shift.metric:
                collateral.append(e.metric)
        if shift is None:
            continue
        shifted = [e for e in mine if e.metric == shift.metric and index_of(e) >= shift.start]
        count = len(shifted)
        fired = [e for e in shifted if e.state is AlertState.FIRING]
        if fired:
            delay = index_of(fired[0]) - shift.start + 1
        if shift.end is not None:
            done = [
                e
                for e in shifted
                if e.state is AlertState.RESOLVED and e.reason == "recovered"
                if index_of(e) >= shift.end
            ]
            if done:
                resolved_after = index_of(done[0]) - shift.end + 1
    return Outcome(
        len(false_metrics), false_metrics, unchanged, delay, resolved_after, count, collateral
    )


def run(scenario: Scenario, seed: int, regression: dict[str, JSON] | None = None) -> Outcome:
    traffic = generate(scenario, seed)
    return measure(scenario, traffic, score_traffic(traffic, regression))


# --- the table ------------------------------------------------------------------------------

SHIFTED = ("support-bot", "B")


def shift_scenario(
    what: str,
    to: float,
    sigma: float,
    failures: float,
    *,
    ramp: int = 0,
    recover: bool = True,
    streams: tuple[Stream, ...] | None = None,
) -> Scenario:
    """One stream shifts at its 400th episode for 400 episodes (then recovers, for 300)."""
    start, length = 400, 400
    end = start + length if recover else None
    kind = f"ramp {ramp}" if ramp else "step"
    label = f"{what} x{to:g}" if what != "failures" else f"failures {failures:.0%}->{to:.0%}"
    return Scenario(
        name=f"{label} {kind}, sigma {sigma:g}, failures {failures:.0%}",
        sigma=sigma,
        failures=failures,
        episodes=start + length + (300 if recover else 0),
        streams=default_streams() if streams is None else streams,
        shifts=((SHIFTED, Shift(what, to, start=start, ramp=ramp, end=end)),),
    )


def quiet_scenario(
    sigma: float, failures: float, episodes: int, streams: tuple[Stream, ...] | None = None
) -> Scenario:
    return Scenario(
        f"unchanged, sigma {sigma:g}, failures {failures:.0%}",
        sigma,
        failures,
        episodes,
        default_streams() if streams is None else streams,
    )


def _fmt(values: Sequence[float]) -> str:
    return f"{statistics.median(values):g} / {max(values):g}" if values else "-"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="runs per shift scenario")
    parser.add_argument(
        "--quiet-episodes", type=int, default=6000, help="episodes per stream, unchanged cells"
    )
    parser.add_argument(
        "--only", choices=("quiet", "shifts"), help="only the unchanged or the shift cells"
    )
    parser.add_argument(
        "--regression", type=orjson.loads, default={}, help="regression settings, as JSON"
    )
    args = parser.parse_args(argv)
    settings = args.regression
    streams = len(default_streams())
    print(
        "| scenario | runs | false firings / 10k | detected | delay median / max "
        "| resolved after median / max | events per regression median / max |"
    )
    print("|---|---|---|---|---|---|---|")
    total_false = total_unchanged = 0
    false_metrics: Counter[str] = Counter()
    for sigma in (0.1, 0.3, 0.5) if args.only != "shifts" else ():
        for failures in (0.0, 0.05, 0.10):
            scenario = quiet_scenario(sigma, failures, args.quiet_episodes)
            out = run(scenario, seed=int(sigma * 100 + failures * 1000), regression=settings)
            false_metrics.update(out.false_metrics)
            total_false += out.false_firings
            total_unchanged += out.unchanged
            rate = out.false_firings / out.unchanged * 10_000
            print(f"| {scenario.name} | {streams} streams | {rate:.2f} | | | | |")
            sys.stdout.flush()
    scenarios = [shift_scenario("cost", 1.5, sigma, 0.05) for sigma in (0.1, 0.3, 0.5)] + [
        shift_scenario("cost", 1.5, 0.5, 0.05, ramp=50),
        shift_scenario("latency", 1.5, 0.3, 0.05),
        shift_scenario("latency", 1.5, 0.5, 0.05),
        shift_scenario("failures", 0.15, 0.1, 0.05),
        shift_scenario("failures", 0.15, 0.3, 0.05),
        shift_scenario("failures", 0.15, 0.5, 0.05),
        shift_scenario("failures", 0.15, 0.1, 0.05, ramp=100),
    ]
    for scenario in scenarios if args.only != "quiet" else []:
        outs = [run(scenario, seed, settings) for seed in range(args.seeds)]
        false_metrics.update(m for o in outs for m in o.false_metrics)
        false_firings = sum(o.false_firings for o in outs)
        unchanged = sum(o.unchanged for o in outs)
        total_false += false_firings
        total_unchanged += unchanged
        delays = [o.delay for o in outs if o.delay is not None]
        resolved = [o.resolved_after for o in outs if o.resolved_after is not None]
        counts = [o.events for o in outs if o.delay is not None]
        print(
            f"| {scenario.name} | {len(outs)} | {false_firings / unchanged * 10_000:.2f} "
            f"| {len(delays)}/{len(outs)} | {_fmt(delays)} "
            f"| {len(resolved)}/{len(outs)}: {_fmt(resolved)} | {_fmt(counts)} |"
        )
        sys.stdout.flush()
    print(
        f"\nAll cells: {total_false} false firings in {total_unchanged:,} unchanged scored "
        f"episodes: {total_false / total_unchanged * 10_000:.2f} per 10,000 "
        f"({', '.join(f'{m} {n}' for m, n in sorted(false_metrics.items())) or 'none'})."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
