#!/usr/bin/env python3
"""The worker's in-process pipeline, per signal.

    .venv/bin/python bench/pipeline_bench.py [--episodes 600] [--repeat 5] [--profile] [--scoring]
    .venv/bin/python bench/pipeline_bench.py --fingerprint
    .venv/bin/python bench/pipeline_bench.py --otlp-endpoint URL [--otlp-mode logs|spans]

Feeds the Kafka benchmark's records (bench/kafka_bench.py: 100-signal episodes of
bench/engine_bench.py's traffic, interleaved round-robin) to `evalstream.stream.pipeline.Pipeline`
exactly as the worker does (keyed envelopes, the record's timestamp as `now`, the 20-assertion suite
of bench/suite.yaml), without a broker. Prints signals/s and µs/signal from CPU time
(`time.process_time`), the median of `--repeat` runs after one warm-up run, for the
per-signal entry point (`Pipeline.handle`) and the batch one (`Pipeline.handle_batch`, what
the worker calls) in batches of the consumer's size. `--scoring` also scores every closed
episode (rolling baselines and per-episode alert rules, no windowed detection): the
per-episode score, delta and alert metrics.

`--otlp-endpoint URL` makes the runs paired: each repeat runs the pipeline without and with
the evaluation-event export (`evalstream/stream/evaluation_export.py`: early verdicts, verdicts at
close and, with `--scoring`, scores, to that OTLP/HTTP endpoint), in alternating order. CPU time is
the whole process's, so the exporter thread's encoding and HTTP work count; a run ends when
the exporter has sent what was queued. `bench/otlp_sink.py` is a receiver to point it at (run
it as a separate process, so its CPU does not count).

`--fingerprint` prints the SHA-256 of every output record (verdicts, episodes, dlq, alerts;
sorted-key JSON) and of the counters and gauges, for the benchmark input and for a messy one
(reordered, duplicated, late, malformed, LLM-call and inactive-episode records; explicit
closes and clock ticks; scoring with alerts), through several pipeline configurations and
both entry points. An optimisation must leave every line unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import gc
import hashlib
import os
import pstats
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from engine_bench import Traffic
from kafka_bench import episode_records, interleaved

from evalstream.assertions.alerting.regression import RegressionDetector
from evalstream.assertions.evaluation.assembly import CloseReason, CloseRules
from evalstream.assertions.scores.stage import ScoringSettings, ScoringStage
from evalstream.assertions.suite_format.suites import Suite, load_suite
from evalstream.connectors.otel_export.evaluation_events import episode_events, verdict_event
from evalstream.connectors.otel_export.otlp_encode import encode_logs, encode_spans
from evalstream.connectors.otel_export.otlp_export import (
    ExportStats,
    OtlpExportSettings,
    resolve_settings,
)
from evalstream.stream.evaluation_export import EvaluationExport
from evalstream.stream.kafka_worker.signals_consumer import BATCH_RECORDS
from evalstream.stream.pipeline import Envelope, InlineRegression, MemorySink, Pipeline
from evalstream.stream.settings import WorkerSettings
from evalstream.stream.telemetry.metrics import PipelineMetrics

HERE = Path(__file__).resolve().parent
SUITE = HERE / "suite.yaml"
NOW0 = 1e12
JSON = Any

# --------------------------------------------------------------------------------------------
# Throughput
# --------------------------------------------------------------------------------------------


def bench_records(episodes: int) -> list[tuple[bytes, bytes]]:
    return list(interleaved([episode_records(i, "x") for i in range(episodes)]))


THROUGHPUT_SCORING = {
    "baselines": {"mode": "rolling", "window": 5, "key_attrs": ["agent_id", "variant"]},
    "alerts": {"cost": {"warning": 5, "critical": 15}, "latency": {"warning": 5, "critical": 15}},
}


def new_pipeline(
    suite: Suite, scoring: bool = False, export: EvaluationExport | None = None
) -> Pipeline:
    stage = None
    if scoring:
        settings = ScoringSettings.load(THROUGHPUT_SCORING)
        stage = ScoringStage(settings, settings.baseline_store())
    exporting = export.sink(MemorySink()) if export is not None else None
    pipeline = Pipeline(
        [suite],
        exporting or MemorySink(),
        rules=WorkerSettings().close_rules(),
        metrics=PipelineMetrics(),
        require_key=True,
        time_each_message=False,
        scoring=stage,
    )
    if exporting is not None:
        exporting.watch(pipeline)
    return pipeline


async def run_handle(p: Pipeline, records: Sequence[tuple[bytes, bytes]]) -> None:
    handle = p.handle
    for i, (k, v) in enumerate(records):
        await handle(Envelope("s", v, k, 0, i, 0), now=NOW0 + i)
    await p.drain()


async def run_batch(p: Pipeline, records: Sequence[tuple[bytes, bytes]]) -> None:
    for start in range(0, len(records), BATCH_RECORDS):
        chunk = records[start : start + BATCH_RECORDS]
        envs = [Envelope("s", v, k, 0, start + j, 0) for j, (k, v) in enumerate(chunk)]
        await p.handle_batch(envs, [NOW0 + start + j for j in range(len(chunk))])
    await p.drain()


RUNNERS = {"handle": run_handle, "handle_batch": run_batch}


def measure(
    mode: str, suite: Suite, records: Sequence[tuple[bytes, bytes]], scoring: bool = False
) -> float:
    """CPU seconds of one run (pipeline construction excluded)."""
    p = new_pipeline(suite, scoring)
    gc.collect()
    started = time.process_time()
    asyncio.run(RUNNERS[mode](p, records))
    return time.process_time() - started


def measure_export(
    mode: str,
    suite: Suite,
    records: Sequence[tuple[bytes, bytes]],
    scoring: bool,
    otlp: OtlpExportSettings,
) -> tuple[float, ExportStats]:
    """CPU seconds of one run exporting to `otlp`, until what was queued is sent."""
    export = EvaluationExport(otlp, PipelineMetrics())
    p = new_pipeline(suite, scoring, export)
    gc.collect()
    started = time.process_time()
    asyncio.run(RUNNERS[mode](p, records))
    stats = export.close(timeout_s=120.0)
    return time.process_time() - started, stats


def paired_export(args: argparse.Namespace) -> None:
    suite = load_suite(SUITE)
    records = bench_records(args.episodes)
    n = len(records)
    otlp = dataclasses.replace(
        resolve_settings(args.otlp_endpoint, args.otlp_mode, os.environ),
        queue_size=args.otlp_queue,
    )
    print(f"# Pipeline with and without OTLP export ({args.otlp_mode} to {otlp.endpoint})")
    print(f"{args.episodes} episodes x 100 signals = {n:,} signals; scoring: {args.scoring}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    columns = ("without: signals/s", "with: signals/s", "cost", "sent", "dropped", "failed")
    print("| entry point | pair | " + " | ".join(columns) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode in args.modes:
        measure(mode, suite, records, args.scoring)  # warm-up of both paths
        measure_export(mode, suite, records, args.scoring, otlp)
        costs = []
        for pair in range(args.repeat):
            order = ("without", "with") if pair % 2 == 0 else ("with", "without")
            got: dict[str, tuple[float, ExportStats | None]] = {}
            for side in order:
                if side == "with":
                    got[side] = measure_export(mode, suite, records, args.scoring, otlp)
                else:
                    got[side] = (measure(mode, suite, records, args.scoring), None)
            without, (with_s, stats) = got["without"][0], got["with"]
            assert stats is not None
            cost = with_s / without - 1
            costs.append(cost)
            print(
                f"| `{mode}` | {pair + 1} | {n / without:,.0f} | {n / with_s:,.0f} | "
                f"{cost:+.1%} | {stats.sent:,} | {stats.dropped:,} | {stats.failed:,} |"
            )
        print(f"| `{mode}` | median | | | {statistics.median(costs):+.1%} | | | |")
    export_parts(suite, records, args.scoring, otlp)


def export_parts(
    suite: Suite, records: Sequence[tuple[bytes, bytes]], scoring: bool, otlp: OtlpExportSettings
) -> None:
    """CPU per event of the two steps on the evaluation side of the queue: mapping a record
    to an event, and encoding events into request bodies (in the exporter's batches)."""
    p = new_pipeline(suite, scoring)
    asyncio.run(run_batch(p, records))
    assert isinstance(p.sink, MemorySink)
    verdicts = [r for _, r in p.sink.records["verdicts"] if r.get("early")]
    episodes = [r for _, r in p.sink.records["episodes"]]
    started = time.process_time()
    events = [e for r in verdicts if (e := verdict_event(r, 0)) is not None]
    for r in episodes:
        events.extend(episode_events(r, 0, with_early=False))
    mapped = time.process_time() - started
    encode = encode_logs if otlp.mode == "logs" else encode_spans
    started = time.process_time()
    for i in range(0, len(events), otlp.batch_size):
        encode(events[i : i + otlp.batch_size], otlp.resource)
    encoded = time.process_time() - started
    n = len(events)
    print()
    print(
        f"{n:,} events; per event: mapping {mapped / n * 1e6:.1f} µs, encoding "
        f"{encoded / n * 1e6:.1f} µs (CPU)"
    )


def throughput(args: argparse.Namespace) -> None:
    suite = load_suite(SUITE)
    records = bench_records(args.episodes)
    n = len(records)
    print(f"# Pipeline, in-process: {args.episodes} episodes x 100 signals = {n:,} signals")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| entry point | signals/s (CPU) | µs/signal | runs |")
    print("|---|---:|---:|---|")
    for mode in args.modes:
        measure(mode, suite, records, args.scoring)  # warm-up: caches, dispatch tables, allocator
        runs = [measure(mode, suite, records, args.scoring) for _ in range(args.repeat)]
        med = statistics.median(runs)
        spread = ", ".join(f"{n / r:,.0f}" for r in runs)
        print(f"| `{mode}` | {n / med:,.0f} | {med / n * 1e6:.2f} | {spread} |")
    if args.profile:
        for mode in args.modes:
            p = new_pipeline(suite, args.scoring)
            prof = cProfile.Profile()
            prof.enable()
            asyncio.run(RUNNERS[mode](p, records))
            prof.disable()
            print(f"\n## profile: {mode}\n```")
            pstats.Stats(prof).sort_stats("tottime").print_stats(22)
            print("```")


# --------------------------------------------------------------------------------------------
# Fingerprint
# --------------------------------------------------------------------------------------------


@dataclass
class Script:
    """Steps of one scenario: ("msg", Envelope, now | None), ("tick", now), ("close", id)."""

    steps: list[tuple[Any, ...]] = field(default_factory=list)

    def msg(self, env: Envelope, now: float | None) -> None:
        self.steps.append(("msg", env, now))


def _retime(obj: dict[str, JSON], rng: random.Random) -> None:
    """Other timestamp spellings: epoch ms, an offset, microseconds, no fraction."""
    ts = obj.get("timestamp")
    if not isinstance(ts, str):
        return
    roll = rng.random()
    if roll < 0.05:
        base = ts[:19]
        obj["timestamp"] = base + ts[19:23] + "000Z"
    elif roll < 0.08:
        obj["timestamp"] = ts[:19] + "Z"
    elif roll < 0.10:
        obj["timestamp"] = ts[:23] + "+00:00"
    elif roll < 0.13:
        from datetime import datetime  # noqa: PLC0415 - only for this rare branch

        obj["timestamp"] = int(datetime.fromisoformat(ts).timestamp() * 1000)


MALFORMED: tuple[tuple[bytes | None, bytes], ...] = (
    (b"m-1", b"{not json"),
    (b"m-2", b"\xff\xfe\x00"),
    (b"m-3", b"[1, 2, 3]"),
    (b"m-4", b'{"id": "a", "episode_id": "m-4", "timestamp": 1}'),
    (b"m-5", b'{"id": "a", "episode_id": "m-5", "name": "x"}'),
    (b"m-6", b'{"id": "a", "episode_id": "m-6", "name": "x", "timestamp": "yesterday"}'),
    (b"m-7", b'{"id": 7, "episode_id": "m-7", "name": "x", "timestamp": 1}'),
    (b"m-8", b'{"id": "a", "episode_id": "m-8", "name": "x", "timestamp": 1, "seq": "1"}'),
    (b"m-9", b'{"id": "a", "episode_id": "m-9", "name": "x", "timestamp": 1, "source": 3}'),
    (b"m-10", b'{"id": "a", "episode_id": "m-10", "name": "x", "timestamp": 1, "attrs": []}'),
    (b"other", b'{"id": "a", "episode_id": "m-11", "name": "x", "timestamp": 1}'),
    (None, b'{"id": "a", "episode_id": "m-12", "name": "x", "timestamp": 1}'),
    (b"\xff", b'{"id": "a", "episode_id": "m-13", "name": "x", "timestamp": 1}'),
    (b"m-14", b'{"episode_id": "m-14", "name": "x:y", "timestamp": 1, "payload": {"a": 1}}'),
    (b"m-15", b"x" * 5000),
    (b"m-16", b'{"id": "a", "episode_id": "m-16", "name": "x", "timestamp": true}'),
)


def _llm_call(episode: str, i: int, rng: random.Random) -> bytes:
    return orjson.dumps(
        {
            "id": f"llm-{episode}-{i}",
            "episode_id": episode,
            "timestamp": 1_790_000_000_000 + i * 1000,
            "durationMs": rng.randint(100, 5000),
            "model": rng.choice(["claude-sonnet-4-5", "claude-haiku-4-5", "mystery"]),
            "provider": "anthropic",
            "agent": rng.choice(["planner", "coder"]),
            "output": {
                "content": "def merge(): LGTM",
                "usage": {"inputTokens": rng.randint(10, 900), "outputTokens": 50},
            },
        }
    )


Item = tuple[bytes | None, bytes, str]  # key, value, topic


def _messy_episode(i: int, seed: int, rng: random.Random) -> list[Item]:
    ep = f"ep-{i}"
    items: list[Item] = []
    traffic = list(Traffic(rng.randint(98, 180), seed=seed * 1000 + i, episode_id=ep))
    if i % 7 == 3:
        traffic = traffic[:-1]  # no harness:end: closed by inactivity, a close or the end
    for obj in traffic:
        if "attrs" in obj:
            obj["attrs"]["variant"] = rng.choice(["a", "b"])
            if i % 5 == 0:
                obj["attrs"]["case_id"] = f"case-{i % 3}"
        if i % 11 == 5 and rng.random() < 0.2:
            del obj["id"]  # a content id
        _retime(obj, rng)
        items.append((ep.encode(), orjson.dumps(obj), "signals"))
    if i % 4 == 1:
        for j in range(rng.randint(1, 3)):
            at = rng.randint(1, len(items))
            items.insert(at, (ep.encode(), _llm_call(ep, j, rng), "llm"))
    return items


def _mess_up(stream: list[Item], rng: random.Random) -> None:
    """Swaps (out of order), duplicates shortly after, late copies much later, malformed."""
    for _ in range(len(stream) // 12):
        j = rng.randrange(len(stream) - 1)
        stream[j], stream[j + 1] = stream[j + 1], stream[j]
    for _ in range(len(stream) // 25):
        j = rng.randrange(len(stream))
        stream.insert(min(len(stream), j + rng.randint(1, 40)), stream[j])
    for _ in range(len(stream) // 150):
        j = rng.randrange(len(stream) // 2)
        key, value, topic = stream[j]
        if topic == "signals":
            obj = orjson.loads(value)
            obj["id"] = f"late-{j}"
            stream.insert(rng.randint(j + 600, len(stream)), (key, orjson.dumps(obj), topic))
    for key, value in MALFORMED:
        stream.insert(rng.randrange(len(stream)), (key, value, "signals"))


def messy_script(seed: int = 7, episodes: int = 90) -> Script:
    """Out-of-order, duplicate, late, malformed, LLM-call and never-ending episodes, with
    explicit closes and clock ticks in between (the worker's sweep and control records)."""
    rng = random.Random(seed)
    per_episode = [_messy_episode(i, seed, rng) for i in range(episodes)]
    # Start episodes at staggered positions, so some run while others have closed.
    stream: list[Item] = []
    active: list[list[Item]] = []
    pending = list(per_episode)
    while pending or active:
        if pending and (len(active) < 8 or rng.random() < 0.01):
            active.append(pending.pop(0))
        source = rng.choice(active)
        stream.append(source.pop(0))
        if not source:
            active.remove(source)
    _mess_up(stream, rng)
    script = Script()
    now = NOW0
    for offset, (key, value, topic) in enumerate(stream):
        now += rng.choice((1.0, 5.0, 20.0, 120.0))
        if rng.random() < 0.00025:
            now += 40_000.0  # a quiet spell: inactive episodes time out at the next tick
        script.msg(Envelope(topic, value, key, offset % 3, offset, int(now)), now)
        if offset % 97 == 0:
            script.steps.append(("tick", now))
        if offset % 389 == 0 and key:
            script.steps.append(("close", key.decode("utf-8", "replace")))
    return script


def bench_script(episodes: int) -> Script:
    script = Script()
    for i, (k, v) in enumerate(bench_records(episodes)):
        script.msg(Envelope("signals", v, k, 0, i, 0), NOW0 + i)
    return script


MESSY_RULES = CloseRules(grace_ms=1_500.0, inactivity_ms=30_000.0, max_signals=150)
SCORING = {
    "baselines": {"mode": "rolling", "window": 5, "key_attrs": ["agent_id", "variant"]},
    "alerts": {"cost": {"warning": 5, "critical": 15}, "latency": {"warning": 5, "critical": 15}},
    "regression": {"reference": 30, "guard": 1, "cooldown_ms": 0, "update_interval_ms": 1},
}


@dataclass
class Config:
    name: str
    rules: CloseRules
    require_key: bool = True
    event_time: bool = False
    use_now: bool = True  # the worker passes the record's timestamp as `now`
    scoring: bool = False
    llm: bool = True


CONFIGS = (
    Config("worker", MESSY_RULES, scoring=True),
    Config("worker-defaults", CloseRules()),
    Config("event-time-reorder", CloseRules(reorder_ms=400.0, grace_ms=0.0), False, True, False),
    Config("wall-clock", MESSY_RULES, require_key=False, use_now=False, scoring=True),
)


async def play(script: Script, config: Config, suites: list[Suite], batch: int) -> MemorySink:
    """Runs a script; `batch` > 0 feeds runs of messages through `handle_batch`."""
    clock = [NOW0]
    calls = [0]

    def read_clock() -> float:
        if config.use_now:
            return clock[0]
        # Without `now`, the clock is read as messages are processed: a clock that advances
        # per read (with a quiet spell now and then) is the same for both entry points.
        calls[0] += 1
        return NOW0 + 20.0 * calls[0] + 40_000.0 * (calls[0] // 3_000)

    sink = MemorySink()
    metrics = PipelineMetrics(process=False)
    stage = None
    regression = None
    if config.scoring:
        settings = ScoringSettings.load(SCORING)
        stage = ScoringStage(settings, settings.baseline_store())
        regression = InlineRegression(RegressionDetector(settings.regression), sink, metrics)
    p = Pipeline(
        suites,
        sink,
        rules=config.rules,
        metrics=metrics,
        clock=read_clock,
        require_key=config.require_key,
        max_message_bytes=4096,
        event_time=config.event_time,
        llm_topics=frozenset({"llm"}) if config.llm else frozenset(),
        scoring=stage,
        regression=regression,
        time_each_message=False,  # a histogram per call: handle and handle_batch differ
    )
    run: list[tuple[Envelope, float | None]] = []

    async def flush() -> None:
        if not run:
            return
        envs = [env for env, _ in run]
        if config.use_now:
            await p.handle_batch(envs, [now for _, now in run])  # type: ignore[misc]
        else:
            await p.handle_batch(envs)
        run.clear()

    for step in script.steps:
        if step[0] == "msg":
            _, env, now = step
            if now is not None:
                clock[0] = now
            now = now if config.use_now else None
            if batch:
                run.append((env, now))
                if len(run) >= batch:
                    await flush()
            else:
                await p.handle(env, now=now)
            continue
        await flush()
        if step[0] == "tick":
            clock[0] = step[1]
            await p.tick()
        else:
            await p.close(step[1], CloseReason.TIMED_OUT)
    await flush()
    await p.drain()
    sink.records["metrics"] = [("", m) for m in metric_samples(metrics)]
    return sink


WALL_TIME = ("evalstream_evaluation_latency_seconds", "evalstream_verdict_delay_seconds")


def metric_samples(metrics: PipelineMetrics) -> list[dict[str, JSON]]:
    """Counters and gauges, and histograms except sums and buckets of wall-clock times."""
    out = []
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.name.endswith("_created"):
                continue  # when the series was made: wall-clock time
            if family.name in WALL_TIME and not s.name.endswith("_count"):
                continue
            out.append({"name": s.name, "labels": s.labels, "value": s.value})
    return sorted(out, key=lambda m: orjson.dumps(m, option=orjson.OPT_SORT_KEYS))


def digest(sink: MemorySink) -> dict[str, str]:
    out = {}
    for stream, records in sorted(sink.records.items()):
        h = hashlib.sha256()
        for key, record in records:
            h.update(key.encode("utf-8", "surrogateescape") + b"\x00")
            h.update(orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n")
        out[stream] = f"{len(records)}:{h.hexdigest()[:16]}"
    return out


def fingerprint(args: argparse.Namespace) -> None:
    suites = [load_suite(SUITE)]
    scripts = {"bench": bench_script(60), "messy": messy_script()}
    for name, script in scripts.items():
        for config in CONFIGS:
            if name == "bench" and config.name != "worker-defaults":
                continue
            for batch in args.batches:
                sink = asyncio.run(play(script, config, suites, batch))
                entry = f"batch={batch}" if batch else "handle"
                parts = " ".join(f"{k}={v}" for k, v in digest(sink).items())
                print(f"{name:5} {config.name:18} {entry:9} {parts}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--fingerprint", action="store_true")
    parser.add_argument("--scoring", action="store_true", help="throughput: score every episode")
    parser.add_argument(
        "--modes", type=lambda s: s.split(","), default=list(RUNNERS), help="handle,handle_batch"
    )
    parser.add_argument("--otlp-endpoint", help="paired runs without and with OTLP export")
    parser.add_argument("--otlp-mode", choices=("logs", "spans"), default="logs")
    parser.add_argument("--otlp-queue", type=int, default=10_000, help="the exporter's queue")
    parser.add_argument(
        "--batches",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[0, 1, 7, BATCH_RECORDS],
        help="fingerprint: 0 = per-signal handle, n = handle_batch in runs of n messages",
    )
    args = parser.parse_args(argv)
    if args.fingerprint:
        fingerprint(args)
    elif args.otlp_endpoint:
        paired_export(args)
    else:
        throughput(args)


if __name__ == "__main__":
    main()
