#!/usr/bin/env python3
"""Benchmark of the Kafka worker through a real broker.

    .venv/bin/python bench/kafka_bench.py [--bootstrap HOST:PORT] [--episodes 3000]
        [--open 10000,100000] [--latency-seconds 20] [--live-seconds 10] [--quick] [--pin]

Without `--bootstrap` it starts the project's own single-node KRaft broker
(evalstream.stream.dev_kafka). Every run uses fresh topics (a random prefix) and prints a Markdown
report:

  a. producer: synthetic agent traffic (bench/engine_bench.py's episodes, 100 signals each,
     a planner -> coder -> tester -> reviewer chain) published as fast as aiokafka can;
  b. ceiling: a bare aiokafka consumer that only reads and decodes the same topic;
  c. worker: one `evalstream worker` process with the 20-assertion suite (bench/suite.yaml)
     consuming the same topic from the start: its steady signals/s (its consumed-signals
     counter, read from its /metrics 4 times a second, between the first reading past 0 and
     the last one short of the total), and until every episode record was published;
  c'. live maximum: the load generator of (d) offers the rate of (c) for --live-seconds while
     the worker consumes: the worker's signals/s meanwhile, with the broker and the generator
     busy on the same machine (on 2 vCPUs they take ~0.8 of a CPU at that rate, which (c),
     read from a topic filled beforehand, does not pay);
  d. latency, at half of (c) and at half of (c'): fresh interleaved episodes are produced at a
     steady pace (one batch per partition every 10 ms, as the gateway publishes, built before
     the clock starts so that pacing costs the generator little); for every early verdict on
     `verdicts`, the wall time from handing over the deciding signal's batch to receiving the
     verdict (p50/p99), split at the verdict record's timestamp (when the worker appended
     it), and the CPU share of the worker, the broker and the generator meanwhile;
  For (c), (c') and (d) the report also gives what a signal cost the worker: its CPU time, the
  part of it spent evaluating (its evaluation-latency histogram, per partition batch), and the
  signals a partition batch held, from its counters before and after.
  e. memory: a fresh worker's resident set with 0, 10k and 100k open episodes (10 signals each,
     no end signal), from its `process_resident_memory_bytes`.

`--pin` gives the worker the last CPU to itself (as a deployment gives it cores of its own)
and the broker and this process the others; the bare consumer then runs on the worker's CPU
too, so that the ratio compares the two on the same CPU. Without it the scheduler places
everything on the machine's CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from engine_bench import Traffic
from process_cpu import cpu_seconds

from evalstream.assertions.wire.signals import decode_signal
from evalstream.connectors.kafka.batched_output import BatchedOutput
from evalstream.connectors.kafka.topics import ensure_topics
from evalstream.stream.dev_kafka import KafkaBroker
from evalstream.stream.kafka_worker.allocator import keep_large_buffers
from evalstream.stream.settings import TOPIC_NAMES

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "bench" / "suite.yaml"
EXE = Path(sys.executable).parent / "evalstream"
SIGNALS_PER_EPISODE = 100
OPEN_EPISODE_SIGNALS = 10
PARTITIONS = 4
# Episodes open at once in the latency run: at ~30k signals/s an episode lasts ~3 s.
LATENCY_CONCURRENT = 1_000
WARM_EPISODES = 300  # complete episodes a fresh worker processes before its memory is read

Record = tuple[bytes, bytes]  # (key, value)


def episode_records(index: int, prefix: str) -> list[Record]:
    episode = f"{prefix}-{index}"
    key = episode.encode()
    traffic = Traffic(SIGNALS_PER_EPISODE, seed=index, episode_id=episode)
    return [(key, orjson.dumps(obj)) for obj in traffic]


def steady(episodes: Sequence[list[Record]], concurrent: int) -> Iterator[Record]:
    """Round-robin over `concurrent` open episodes; as one ends, the next one starts. Live
    traffic: episodes start and close all along, not all at the end of the run.

    Slot i opens its first episode only at round i * length / concurrent, so the slots'
    phases are spread evenly: otherwise every slot's episode would end in the same round,
    and the worker would close `concurrent` episodes at once, in waves (whose bursts of
    ~1,000 closes dominated the tail of earlier latency runs)."""
    waiting = iter(episodes)
    length = max(1, max((len(e) for e in episodes[:concurrent]), default=1))
    pending: list[tuple[int, list[Record]]] = [
        (i * length // concurrent, e) for i, e in enumerate(islice(waiting, concurrent))
    ]
    open_: list[Iterator[Record]] = []
    round_ = 0
    while open_ or pending:
        while pending and pending[0][0] <= round_:
            open_.append(iter(pending.pop(0)[1]))
        still_open: list[Iterator[Record]] = []
        for current in open_:
            record = next(current, None)
            if record is None:
                following = next(waiting, None)
                if following is None:
                    continue
                current = iter(following)  # noqa: PLW2901 # the slot's next episode
                record = next(current)
            yield record
            still_open.append(current)
        open_ = still_open
        round_ += 1


def interleaved(episodes: Sequence[list[Record]]) -> Iterator[Record]:
    """Round-robin over episodes, as concurrent agents would emit."""
    longest = max(len(e) for e in episodes)
    for i in range(longest):
        for records in episodes:
            if i < len(records):
                yield records[i]


def cpu_sets(pin: bool) -> tuple[set[int], set[int]] | None:
    """(the worker's CPU, everyone else's) with --pin: the last CPU for the worker alone, as
    a deployed worker has its own cores; None without --pin (the scheduler decides)."""
    if not pin:
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs at least 2 CPUs")
    return {cpus[-1]}, set(cpus[:-1])


def pin_process(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` onto `cpus` (a thread started later inherits its creator's)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), cpus)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------------------------
# Kafka clients
# --------------------------------------------------------------------------------------------


def new_producer(bootstrap: str) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=5, max_batch_size=512 * 1024
    )


async def produce_all(bootstrap: str, topic: str, records: Sequence[Record]) -> float:
    """Publishes as fast as possible; returns signals/s until the last acknowledgement."""
    producer = new_producer(bootstrap)
    await producer.start()
    start = time.perf_counter()
    try:
        futures = []
        for key, value in records:
            futures.append(await producer.send(topic, value, key=key))
            if len(futures) >= 10_000:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return len(records) / (time.perf_counter() - start)


async def bare_consume(bootstrap: str, topic: str, total: int) -> float:
    """Reads and decodes `total` signals from the start; returns signals/s."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        group_id=None,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    await consumer.start()
    seen = 0
    start: float | None = None
    try:
        while seen < total:
            batch = await consumer.getmany(timeout_ms=1000, max_records=5_000)
            for messages in batch.values():
                if start is None:
                    start = time.perf_counter()
                for message in messages:
                    decode_signal(message.value)
                    seen += 1
    finally:
        await consumer.stop()
    assert start is not None
    return total / (time.perf_counter() - start)


# --------------------------------------------------------------------------------------------
# The worker under test
# --------------------------------------------------------------------------------------------

SAMPLE = re.compile(rb"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", re.M)


@dataclass(frozen=True)
class WorkerCost:
    """Counters of the worker at one moment: subtracted, what a stretch of work cost it."""

    signals: float  # consumed
    batches: float  # partition batches evaluated (its evaluation-latency histogram's count)
    evaluation_s: float  # seconds inside those batches (the histogram's sum)
    cpu_s: float  # CPU seconds of the whole process (Linux /proc)

    def __sub__(self, other: WorkerCost) -> WorkerCost:
        return WorkerCost(
            self.signals - other.signals,
            self.batches - other.batches,
            self.evaluation_s - other.evaluation_s,
            self.cpu_s - other.cpu_s,
        )

    def summary(self) -> str:
        """CPU µs a signal / of which evaluating µs a signal / signals a partition batch."""
        if self.signals <= 0 or self.batches <= 0:
            return "n/a"
        return (
            f"{self.cpu_s / self.signals * 1e6:.1f} / {self.evaluation_s / self.signals * 1e6:.1f}"
            f" / {self.signals / self.batches:,.0f}"
        )


COST_ROW = "CPU µs a signal / of which evaluating, µs / signals a partition batch"


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[bytes]
    metrics_port: int
    log: Path

    def metrics(self) -> dict[str, float]:
        """Sums of each metric family's samples (labels dropped) from /metrics."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read()
        out: dict[str, float] = {}
        for name, _labels, value in SAMPLE.findall(text):
            key = name.decode()
            out[key] = out.get(key, 0.0) + float(value)
        return out

    def cost(self) -> WorkerCost:
        sample = self.metrics()
        return WorkerCost(
            sample.get("evalstream_signals_consumed_total", 0.0),
            sample.get("evalstream_evaluation_latency_seconds_count", 0.0),
            sample.get("evalstream_evaluation_latency_seconds_sum", 0.0),
            cpu_seconds(self.proc.pid),
        )

    def wait(self, metric: str, target: float, timeout: float) -> tuple[float, float]:
        """Polls until `metric` >= target; returns (first time it was > 0, time it got there)."""
        samples = self.samples(metric, target, timeout, every=0.05)
        first = next(t for t, value in samples if value > 0)
        return first, samples[-1][0]

    def samples(
        self, metric: str, target: float, timeout: float, every: float
    ) -> list[tuple[float, float]]:
        """(time, value) of `metric` every `every` seconds until it reaches `target`."""
        deadline = time.monotonic() + timeout
        samples: list[tuple[float, float]] = []
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log.read_text()[-3000:]}")
            try:
                value = self.metrics().get(metric, 0.0)
            except OSError:
                value = 0.0
            samples.append((time.perf_counter(), value))
            if value >= target:
                return samples
            time.sleep(every)
        raise TimeoutError(f"{metric} did not reach {target} in {timeout}s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def steady_rate(samples: Sequence[tuple[float, float]], total: float) -> float:
    """The rate between the first sample past 0 and the last one short of `total`: the
    worker's pace once it consumes, without its start-up and the run's last fetch."""
    inside = [(t, v) for t, v in samples if 0 < v < total]
    if len(inside) < 2:  # too short a run to see a slope: first to last instead
        started = next(t for t, v in samples if v > 0)
        return total / (samples[-1][0] - started)
    (t1, v1), (t2, v2) = inside[0], inside[-1]
    return (v2 - v1) / (t2 - t1)


def start_worker(bootstrap: str, prefix: str, workdir: Path) -> WorkerProcess:
    port = free_port()
    env = {
        **os.environ,
        "EVALSTREAM_BROKER": bootstrap,
        "EVALSTREAM_APP_ID": prefix.rstrip("."),
        "EVALSTREAM_TOPIC_PREFIX": prefix,
        "EVALSTREAM_PARTITIONS": str(PARTITIONS),
        "EVALSTREAM_SUITES": str(SUITE),
        "EVALSTREAM_METRICS_PORT": str(port),
        "EVALSTREAM_GRACE_MS": "500",
        "EVALSTREAM_DATA_DIR": str(workdir / "data"),
    }
    log = workdir / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(EXE), "worker", "--loglevel", "WARNING"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    worker = WorkerProcess(proc, port, log)
    deadline = time.monotonic() + 60
    while True:
        try:
            worker.metrics()
            return worker
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"worker did not start: {log.read_text()[-3000:]}") from None
            time.sleep(0.2)


# --------------------------------------------------------------------------------------------
# Latency at half load
# --------------------------------------------------------------------------------------------


@dataclass
class LatencyRun:
    latencies: list[tuple[float, float]]  # per early verdict: (to appended, to received) s
    behind: float  # how far the load generator fell behind its schedule, at worst, s
    cpu: dict[str, float]  # share of one CPU while pacing, by process
    cost: WorkerCost  # what pacing cost the worker
    seconds: float  # how long pacing took

    @property
    def consumed_rate(self) -> float:
        """The worker's signals/s while pacing."""
        return self.cost.signals / self.seconds


TICK_S = 0.01  # the load generator publishes a batch per partition every tick


async def latency_run(
    bootstrap: str,
    prefix: str,
    rate: float,
    seconds: float,
    concurrent: int,
    *,
    pids: dict[str, int],
    tag: str = "lat",
    cost: Callable[[], WorkerCost],
) -> LatencyRun:
    """Produces fresh episodes at `rate` signals/s; returns, per early verdict, the seconds
    from producing its deciding signal to the worker appending the verdict (the verdict
    record's timestamp) and to receiving it; how far behind its schedule the load
    generator fell at worst (seconds: when it cannot keep the rate, it catches up in bursts
    above the rate, and the latency measured then is not the latency at that rate); and the
    CPU share of each process of `pids` (and of this one) while it paced, and the worker's
    consumption rate and costs meanwhile from `cost` (its counters). Wall clock: both ends are on
    this machine. `tag` makes the episode ids of one run unlike any other's."""
    topic = f"{prefix}signals"
    latencies: list[tuple[float, float]] = []
    consumer = AIOKafkaConsumer(
        f"{prefix}verdicts", bootstrap_servers=bootstrap, auto_offset_reset="latest", group_id=None
    )
    await consumer.start()
    await consumer.seek_to_end()
    stop = asyncio.Event()
    # Whole episodes only, `concurrent` of them open at any time (0: all of them, every one
    # ending in the run's last second): each ends and closes.
    n_episodes = max(concurrent, 50, round(rate * seconds / SIGNALS_PER_EPISODE))
    episodes = [episode_records(10_000_000 + i, f"{prefix}{tag}") for i in range(n_episodes)]
    records = list(steady(episodes, concurrent) if concurrent else interleaved(episodes))
    # Every tick's batches are built before the clock starts (one per partition, stamped with
    # the tick's planned time): pacing then only hands them over, and the load generator, on
    # the CPUs of the worker and the broker, costs them as little as it can.
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=0, max_batch_size=4 * 1_048_576
    )
    await producer.start()
    per_tick = max(1, int(rate * TICK_S))
    start_wall = time.time() + 2.0 + len(records) * 4e-6  # after the build (~2 µs a record)
    plan = await build_ticks(producer, topic, records, per_tick, start_wall)
    sent_at = [float("nan")] * len(plan.ticks)

    reader = asyncio.create_task(read_verdicts(consumer, plan, sent_at, latencies, stop))
    # The load generator must not pause on its own: a full collection over these records and
    # ids took 60-120 ms here, and stalled the verdict reader with the pacing loop.
    gc.collect()
    gc.freeze()
    gc.disable()
    pids = {**pids, "load generator": os.getpid()}
    try:
        await asyncio.sleep(max(0.0, start_wall - time.time()))
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        cost_before = cost()
        started = time.perf_counter()
        behind = await paced(producer, topic, plan.ticks, sent_at)
        elapsed = time.perf_counter() - started
        cpu = {name: (cpu_seconds(pid) - cpu_before[name]) / elapsed for name, pid in pids.items()}
        spent = cost() - cost_before
        await producer.flush()
        await asyncio.sleep(5)  # let the last verdicts arrive
    finally:
        gc.enable()
        gc.unfreeze()
        stop.set()
        await reader
        await producer.stop()
        await consumer.stop()
    return LatencyRun(latencies, behind, cpu, spent, elapsed)


async def read_verdicts(
    consumer: AIOKafkaConsumer,
    plan: TickPlan,
    sent_at: Sequence[float],
    latencies: list[tuple[float, float]],
    stop: asyncio.Event,
) -> None:
    """Times every early verdict from its deciding signal's tick until `stop`."""
    while not stop.is_set():
        batch = await consumer.getmany(timeout_ms=200)
        now = time.time()
        for messages in batch.values():
            for message in messages:
                record = orjson.loads(message.value)
                if not record.get("early"):
                    continue
                tick = plan.tick_of.get((record["episode_id"], record["decided_at"]))
                if tick is not None:
                    sent = sent_at[tick]
                    latencies.append((message.timestamp / 1000 - sent, now - sent))


@dataclass
class TickPlan:
    ticks: list[list[tuple[int, Any]]]  # per tick: (partition, aiokafka BatchBuilder)
    tick_of: dict[tuple[str, str], int]  # (episode id, signal id) -> its tick


async def build_ticks(
    producer: AIOKafkaProducer,
    topic: str,
    records: Sequence[Record],
    per_tick: int,
    start_wall: float,
) -> TickPlan:
    """`per_tick` records a tick, in one batch per partition (the partition `send` would
    choose for the key), each record stamped with its tick's planned wall time."""
    keys = BatchedOutput(producer)
    await keys.add_topics([topic])
    plan = TickPlan([], {})
    for tick, first in enumerate(range(0, len(records), per_tick)):
        timestamp = int((start_wall + tick * TICK_S) * 1000)
        builders: dict[int, Any] = {}
        for key, value in records[first : first + per_tick]:
            partition = keys.partition_of(topic, key)
            builder = builders.get(partition)
            if builder is None:
                builder = builders[partition] = producer.create_batch()
            if builder.append(key=key, value=value, timestamp=timestamp) is None:
                raise SystemExit("a tick's batch outgrew max_batch_size")
            obj = orjson.loads(value)
            plan.tick_of[(obj["episode_id"], obj["id"])] = tick
        plan.ticks.append(list(builders.items()))
    return plan


async def paced(
    producer: AIOKafkaProducer,
    topic: str,
    ticks: Sequence[list[tuple[int, Any]]],
    sent_at: list[float],
) -> float:
    """Hands over a tick's batches every TICK_S, noting when in `sent_at`; returns how far
    behind its schedule it fell at worst, in seconds. A sender per partition hands its
    batches over in order: aiokafka's `send_batch` waits while the partition's previous batch
    is still queued, and the pacing loop must not."""
    queues: dict[int, asyncio.Queue[Any]] = {}
    senders: list[asyncio.Task[None]] = []

    async def send_in_order(partition: int, queue: asyncio.Queue[Any]) -> None:
        while (builder := await queue.get()) is not None:
            await producer.send_batch(builder, topic, partition=partition)

    behind = 0.0
    start = time.perf_counter()
    for tick, batches in enumerate(ticks):
        late = time.perf_counter() - (start + tick * TICK_S)
        behind = max(behind, late)
        # Yields every tick, even when late: the verdict reader shares this loop.
        await asyncio.sleep(max(0.0, -late))
        sent_at[tick] = time.time()
        for partition, builder in batches:
            queue = queues.get(partition)
            if queue is None:
                queue = queues[partition] = asyncio.Queue()
                senders.append(asyncio.create_task(send_in_order(partition, queue)))
            queue.put_nowait(builder)
    for queue in queues.values():
        queue.put_nowait(None)
    await asyncio.gather(*senders)
    return behind


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# --------------------------------------------------------------------------------------------
# Memory with open episodes
# --------------------------------------------------------------------------------------------


def open_records(start: int, count: int, prefix: str) -> list[Record]:
    """The first signals of `count` episodes that never end (no end signal)."""
    out: list[Record] = []
    for i in range(start, start + count):
        episode = f"{prefix}open-{i}"
        traffic = Traffic(SIGNALS_PER_EPISODE, seed=i, episode_id=episode)
        for n, obj in enumerate(traffic):
            if n >= OPEN_EPISODE_SIGNALS:
                break
            out.append((episode.encode(), orjson.dumps(obj)))
    return out


# --------------------------------------------------------------------------------------------


@dataclass
class Figures:
    episodes: int
    total: int = 0
    produce_rate: float = 0.0
    bare_rate: float = 0.0
    worker_rate: float = 0.0
    worker_rate_closed: float = 0.0
    worker_cost: WorkerCost | None = None  # of the throughput run (c)
    live_rate: float = 0.0
    live_cpu: dict[str, float] = field(default_factory=dict)
    live_cost: WorkerCost | None = None
    timed: list[tuple[str, float, LatencyRun]] = field(default_factory=list)  # (of, rate, run)
    concurrent: int = 0
    pinned: bool = False
    memory: list[tuple[int, float]] = field(default_factory=list)


def measure(
    bootstrap: str, workdir: Path, args: argparse.Namespace, fig: Figures, broker_pid: int | None
) -> None:
    prefix = f"kb{uuid.uuid4().hex[:8]}."
    asyncio.run(ensure_topics(bootstrap, [prefix + n for n in TOPIC_NAMES], PARTITIONS))
    topic = f"{prefix}signals"
    print(f"generating {fig.episodes} episodes x {SIGNALS_PER_EPISODE} signals ...")
    records = list(interleaved([episode_records(i, prefix) for i in range(fig.episodes)]))
    fig.total = len(records)
    fig.produce_rate = asyncio.run(produce_all(bootstrap, topic, records))
    del records
    pins: tuple[set[int], set[int]] | None = args.pins
    if pins is not None:  # the ceiling on the CPU the worker will have to itself
        pin_process(os.getpid(), pins[0])
    fig.bare_rate = asyncio.run(bare_consume(bootstrap, topic, fig.total))
    if pins is not None:
        pin_process(os.getpid(), pins[1])

    worker = start_worker(bootstrap, prefix, workdir)
    if pins is not None:
        pin_process(worker.proc.pid, pins[0])
    try:
        # From its first consumed batch: the start-up's and the group join's CPU are left out.
        worker.wait("evalstream_signals_consumed_total", 1, timeout=300)
        started = worker.cost()
        # Scraped 4 times a second: each scrape costs the worker CPU (its /metrics thread
        # shares the GIL), which 20 scrapes a second made ~6 % of its samples.
        progress = worker.samples(
            "evalstream_signals_consumed_total", fig.total, timeout=900, every=0.25
        )
        first = next(t for t, value in progress if value > 0)
        _, closed = worker.wait("evalstream_episodes_closed_total", fig.episodes, timeout=300)
        fig.worker_cost = worker.cost() - started
        fig.worker_rate = steady_rate(progress, fig.total)
        fig.worker_rate_closed = fig.total / (closed - first)
        fig.concurrent = args.concurrent
        timed_runs(worker, bootstrap, prefix, args, fig, broker_pid=broker_pid)
    finally:
        worker.stop()
    measure_memory(bootstrap, workdir, args, fig)


def measure_memory(bootstrap: str, workdir: Path, args: argparse.Namespace, fig: Figures) -> None:
    """e. A fresh worker on fresh topics (the live run's backlog grew the first one's heap,
    which CPython keeps): its resident set once warm and idle, then with episodes open that
    never end."""
    prefix = f"kb{uuid.uuid4().hex[:8]}."
    asyncio.run(ensure_topics(bootstrap, [prefix + n for n in TOPIC_NAMES], PARTITIONS))
    worker = start_worker(bootstrap, prefix, workdir)
    if args.pins is not None:
        pin_process(worker.proc.pid, args.pins[0])
    try:
        # Warmed up by complete episodes first: its buffers and caches at working size.
        warm = [r for i in range(WARM_EPISODES) for r in episode_records(i, f"{prefix}warm")]
        asyncio.run(produce_all(bootstrap, f"{prefix}signals", warm))
        worker.wait("evalstream_episodes_closed_total", WARM_EPISODES, timeout=300)
        time.sleep(2)
        base = worker.metrics()
        fig.memory.append((0, base["process_resident_memory_bytes"]))
        consumed = base.get("evalstream_signals_consumed_total", 0.0)
        opened = 0
        for count in args.open_counts:
            batch = open_records(opened, count - opened, prefix)
            asyncio.run(produce_all(bootstrap, f"{prefix}signals", batch))
            consumed += len(batch)
            opened = count
            worker.wait("evalstream_signals_consumed_total", consumed, timeout=900)
            time.sleep(2)
            sample = worker.metrics()
            fig.memory.append((count, sample["process_resident_memory_bytes"]))
            print(f"open episodes reported by the worker: {sample.get('evalstream_open_episodes')}")
    finally:
        worker.stop()


def settled(worker: WorkerProcess, metric: str, every: float = 1.0) -> None:
    """Waits until `metric` stops growing (the worker caught up with its backlog)."""
    last = -1.0
    while (value := worker.metrics().get(metric, 0.0)) != last:
        last = value
        time.sleep(every)


def timed_runs(
    worker: WorkerProcess,
    bootstrap: str,
    prefix: str,
    args: argparse.Namespace,
    fig: Figures,
    *,
    broker_pid: int | None,
) -> None:
    """c': the live maximum; d: latency at half of (c) and at half of (c')."""
    pids = {"worker": worker.proc.pid}
    if broker_pid is not None:
        pids["broker"] = broker_pid

    # c'. The live maximum: the load generator offers the rate of (c) while the worker
    # consumes, with the broker and the generator busy on the same machine.
    live = asyncio.run(
        latency_run(
            bootstrap,
            prefix,
            fig.worker_rate,
            args.live_seconds,
            args.concurrent,
            pids=pids,
            tag="live",
            cost=worker.cost,
        )
    )
    fig.live_rate, fig.live_cpu, fig.live_cost = live.consumed_rate, live.cpu, live.cost
    settled(worker, "evalstream_signals_consumed_total")  # before the clock starts again
    for of, maximum in (("c", fig.worker_rate), ("c'", fig.live_rate)):
        timed = asyncio.run(
            latency_run(
                bootstrap,
                prefix,
                maximum / 2,
                args.latency_seconds,
                args.concurrent,
                pids=pids,
                tag=f"lat{len(fig.timed)}",
                cost=worker.cost,
            )
        )
        fig.timed.append((of, maximum / 2, timed))
        settled(worker, "evalstream_signals_consumed_total")


def print_report(fig: Figures) -> None:
    rows = [
        ("signals in the throughput run", f"{fig.total:,} ({fig.episodes:,} episodes)"),
        ("a. producer, signals/s", f"{fig.produce_rate:,.0f}"),
        ("b. bare consumer (read + decode), signals/s", f"{fig.bare_rate:,.0f}"),
        ("c. worker, steady consumption (scraped 4/s), signals/s", f"{fig.worker_rate:,.0f}"),
        ("c. worker, until every episode record was out, signals/s",
         f"{fig.worker_rate_closed:,.0f}"),
        ("c. worker / bare consumer", f"{fig.worker_rate / fig.bare_rate:.0%}"),
    ]  # fmt: skip
    if fig.worker_cost is not None:
        rows.append((f"c. worker, {COST_ROW}", fig.worker_cost.summary()))
    rows += [
        ("c'. worker, live maximum: consuming while the load generator offers (c), signals/s",
         f"{fig.live_rate:,.0f}"),
        ("c'. CPU meanwhile, share of one CPU: " + ", ".join(fig.live_cpu),
         " / ".join(f"{share:.2f}" for share in fig.live_cpu.values())),
    ]  # fmt: skip
    if fig.live_cost is not None:
        rows.append((f"c'. worker, {COST_ROW}", fig.live_cost.summary()))
    open_at_once = f"{fig.concurrent:,} episodes open at once" if fig.concurrent else "all open"
    for of, rate, run in fig.timed:
        d = f"d. at half ({of})"
        lat = [total for _, total in run.latencies]
        appended = [at for at, _ in run.latencies]
        delivered = [total - at for at, total in run.latencies]
        rows.append((f"{d}: early verdicts timed at {rate:,.0f} signals/s, {open_at_once}",
                     f"{len(lat):,}"))  # fmt: skip
        if not lat:
            continue
        rows += [
            (f"{d}: produce -> early verdict p50, ms", f"{percentile(lat, 50) * 1000:.1f}"),
            (f"{d}: produce -> early verdict p99, ms", f"{percentile(lat, 99) * 1000:.1f}"),
            (f"{d}: produce -> early verdict mean, ms", f"{statistics.fmean(lat) * 1000:.1f}"),
            (f"{d}: of which produce -> worker appends the verdict, p50 / p99, ms",
             f"{percentile(appended, 50) * 1000:.1f} / {percentile(appended, 99) * 1000:.1f}"),
            (f"{d}: of which verdict appended -> received, p50 / p99, ms",
             f"{percentile(delivered, 50) * 1000:.1f} / {percentile(delivered, 99) * 1000:.1f}"),
            (f"{d}: load generator, furthest behind its schedule, ms", f"{run.behind * 1000:.0f}"),
            (f"{d}: CPU while timed, share of one CPU: " + ", ".join(run.cpu),
             " / ".join(f"{share:.2f}" for share in run.cpu.values())),
        ]  # fmt: skip
        rows.append((f"{d}: worker, {COST_ROW}", run.cost.summary()))
    base_rss = fig.memory[0][1] if fig.memory else 0.0
    for count, rss in fig.memory:
        extra = f", {(rss - base_rss) / count:,.0f} B per open episode" if count else ""
        rows.append((f"e. RSS with {count:,} open episodes", f"{rss / 2**20:,.0f} MiB{extra}"))
    print()
    placement = (
        "pinned: the worker (and the bare consumer) on a CPU of its own, the broker and the "
        "load generator on the others"
        if fig.pinned
        else "unpinned: broker, load generator and worker share every CPU"
    )
    print(
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {PARTITIONS} partitions, "
        f"{placement}"
    )
    print()
    print("| measure | value |")
    print("|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--bootstrap", help="An existing broker (default: start the dev one).")
    parser.add_argument("--episodes", type=int, default=3000, help="Episodes of 100 signals.")
    parser.add_argument("--open", default="10000,100000", help="Open-episode counts to measure.")
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument(
        "--live-seconds", type=float, default=10.0, help="The live-maximum run (c')."
    )
    parser.add_argument(
        "--concurrent",
        type=int,
        default=LATENCY_CONCURRENT,
        help="Episodes open at once in the latency run (0: all, ending together at the end).",
    )
    parser.add_argument("--quick", action="store_true", help="Small sizes, for a smoke run.")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="Run the worker (and the bare consumer) on the last CPU alone, the broker and "
        "the load generator on the others.",
    )
    args = parser.parse_args()
    # The bare consumer reads with the worker's allocator settings
    # (evalstream/stream/kafka_worker/allocator.py): the
    # ceiling must not lose to the worker on how fetch buffers are mapped.
    keep_large_buffers()
    if args.quick:
        args.episodes, args.open, args.latency_seconds, args.live_seconds = 300, "1000,5000", 5, 3
    args.open_counts = [int(x) for x in args.open.split(",") if x]
    fig = Figures(args.episodes, pinned=args.pin)
    pins = args.pins = cpu_sets(args.pin)  # once: this process is pinned next
    if pins is not None:  # the broker started below inherits these CPUs
        pin_process(os.getpid(), pins[1])
    with ExitStack() as stack:
        bootstrap, broker_pid = args.bootstrap, None
        if bootstrap is None:
            broker = stack.enter_context(KafkaBroker())
            bootstrap, broker_pid = broker.bootstrap, broker.pid
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kbench-")))
        measure(bootstrap, workdir, args, fig, broker_pid)
    print_report(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
