"""Crash recovery and scale-out of the worker against the real broker.

Traffic: hundreds of interleaved episodes, paced so that workers are killed mid-stream.
Expected results: `evalstream check` on the very same signals. Every episode and every
verdict must be reported, and repeated deliveries must be identical.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.suite_format.suites import load_suite
from evalstream.stream.dev_kafka import KafkaBroker
from evalstream.stream.offline import check_files
from tests.kafka.helpers import Deployment, by_episode, consume, produce, without_key

pytestmark = pytest.mark.kafka

SUITE = """name: synthetic
defaultAssertions:
  - type: signal.trajectory
    patterns: [harness:start, "tool:call", harness:end]
  - type: signal.count
    pattern: text:delta
    min: 10
  - type: tool.notCalled
    name: Forbidden
  - type: metric.activations
    max: 3
  - type: output.contains
    text: done
"""


def synthetic(episodes: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    """Interleaved episodes of 20-40 signals; some break an assertion early."""
    rng = random.Random(seed)
    pending = [f"ep-{i:04d}" for i in range(episodes)]
    active: dict[str, list[dict[str, object]]] = {}
    out: list[tuple[bytes, bytes]] = []
    clock = 1_800_000_000_000
    while pending or active:
        while pending and len(active) < 40:
            episode = pending.pop(0)
            n = rng.randint(20, 40)
            body: list[dict[str, object]] = [{"name": "agent:activated", "payload": {"agent": "a"}}]
            for _ in range(n):
                if rng.random() < 0.15:
                    tool = "Forbidden" if rng.random() < 0.05 else rng.choice(["Read", "Edit"])
                    body.append({"name": "tool:call", "payload": {"name": tool}})
                else:
                    body.append({"name": "text:delta", "payload": {"content": "x"}})
            body.append(
                {"name": "harness:end", "payload": {"output": rng.choice(["done", "nope"])}}
            )
            active[episode] = [{"name": "harness:start", "attrs": {"agent_id": "syn"}}, *body]
        episode = rng.choice(sorted(active))
        item = active[episode].pop(0)
        clock += rng.randint(1, 5)
        seq = len([1 for k, _ in out if k == episode.encode()])
        signal_ = {
            "id": f"{episode}-{seq}",
            "episode_id": episode,
            "timestamp": clock,
            "seq": seq,
            **item,
        }
        out.append((episode.encode(), json.dumps(signal_).encode()))
        if not active[episode]:
            del active[episode]
    return out


def wait_for_commits(
    dep: Deployment, partitions: int = 1, timeout: float = 60, *, of: str | None = None
) -> None:
    """Until the group committed offsets > 0 on at least `partitions` signals partitions
    (with `of`, partitions that the worker of that name has read: its log names them).

    A fixed sleep is not enough on a loaded machine: a worker that committed nothing yet
    would be killed before the test can show a resume from the middle of the log."""

    async def committed() -> set[int]:
        admin = AIOKafkaAdminClient(bootstrap_servers=dep.bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(dep.app_id)
        except KafkaError:  # e.g. the group's coordinator is not known yet
            return set()
        finally:
            await admin.close()
        return {
            tp.partition
            for tp, meta in offsets.items()
            if tp.topic == dep.topic("signals") and meta.offset > 0
        }

    def counted() -> int:
        done = asyncio.run(committed())
        if of is not None:
            log = (dep.workdir / f"{of}.log").read_text()
            done &= {int(p) for p in re.findall(r"partition (\d+) resumes at offset", log)}
        return len(done)

    deadline = time.monotonic() + timeout
    while counted() < partitions:
        assert time.monotonic() < deadline, f"no commits within {timeout}s: {dep.logs()}"
        time.sleep(0.5)


@pytest.fixture
def setup(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> Iterator[tuple[Deployment, list[tuple[bytes, bytes]], list[EpisodeResult]]]:
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    records = synthetic(250)
    recording = tmp_path / "recording.jsonl"
    recording.write_bytes(b"".join(value + b"\n" for _, value in records))
    expected = check_files([str(recording)], [load_suite(suite)]).results
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(suite)])
    dep.create_topics()
    yield dep, records, expected
    dep.stop_all()


def check_reported(dep: Deployment, expected: list[EpisodeResult]) -> None:
    episodes = by_episode(
        asyncio.run(consume(dep.bootstrap, dep.topic("episodes"), until=len(expected), timeout=150))
    )
    missing = [r.episode_id for r in expected if r.episode_id not in episodes]
    assert not missing, (len(missing), missing[:5], dep.logs()[-4000:])
    for result in expected:
        distinct = {json.dumps(without_key(d), sort_keys=True) for d in episodes[result.episode_id]}
        assert len(distinct) == 1, f"{result.episode_id} was reported differently"
        got = json.loads(distinct.pop())
        assert got == json.loads(json.dumps(result.to_json(), sort_keys=True)), result.episode_id
    n_verdicts = sum(len(r.assertions) for r in expected)
    verdicts = asyncio.run(
        consume(dep.bootstrap, dep.topic("verdicts"), until=n_verdicts, timeout=60)
    )
    assert len(verdicts) == n_verdicts
    for key, records in verdicts.items():
        assert len({json.dumps(d, sort_keys=True) for d in records}) == 1, key
    assert any(v[0]["early"] and v[0]["verdict"] == "fail" for v in verdicts.values())


def produce_in_background(
    dep: Deployment, records: list[tuple[bytes, bytes]], rate: float
) -> threading.Thread:
    thread = threading.Thread(
        target=lambda: asyncio.run(
            produce(dep.bootstrap, dep.topic("signals"), records, rate=rate)
        ),
        daemon=True,
    )
    thread.start()
    return thread


def test_sigkill_mid_stream_and_restart_loses_nothing(
    setup: tuple[Deployment, list[tuple[bytes, bytes]], list[EpisodeResult]],
) -> None:
    dep, records, expected = setup
    first = dep.start_worker("w1")
    time.sleep(6)  # joined the group
    # Paced below the worker's rate, so that commits advance while the stream flows.
    producer = produce_in_background(dep, records, rate=800)
    wait_for_commits(dep)  # killed mid-stream, after it committed progress
    first.send_signal(signal.SIGKILL)
    first.wait()
    time.sleep(1)
    dep.start_worker("w1-restarted")
    producer.join(timeout=120)
    check_reported(dep, expected)
    restarted = (dep.workdir / "w1-restarted.log").read_text()
    resumed = [int(m) for m in re.findall(r"resumes at offset (\d+)", restarted)]
    assert any(offset > 0 for offset in resumed), "the restart must resume from committed offsets"


def test_two_workers_one_killed_the_other_takes_over(
    setup: tuple[Deployment, list[tuple[bytes, bytes]], list[EpisodeResult]],
) -> None:
    dep, records, expected = setup
    dep.start_worker("w1")
    dep.start_worker("w2")
    dep.supervise()  # restarts a worker that exits by itself (a stalled-recovery watchdog)
    time.sleep(8)  # both joined: four partitions each
    producer = produce_in_background(dep, records, rate=800)
    wait_for_commits(dep, partitions=2)  # the group committed progress
    wait_for_commits(dep, of="w1")  # and w1 on a partition of its own, which w2 takes over
    dep.kill("w1")
    producer.join(timeout=120)
    check_reported(dep, expected)
    survivor = "".join(p.read_text() for p in dep.workdir.glob("w2*.log"))
    took_over = [int(m) for m in re.findall(r"resumes at offset (\d+)", survivor)]
    assert any(offset > 0 for offset in took_over), "w2 must resume w1's partitions mid-log"
