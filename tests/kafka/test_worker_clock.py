"""The worker's clock is the broker's, not the producers': a producer whose clock is ten
minutes behind gets the same episodes and verdicts as one on time."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from evalstream.assertions.suite_format.suites import load_suite
from evalstream.connectors.kafka.topics import ensure_topics, topic_config
from evalstream.stream.dev_kafka import KafkaBroker
from evalstream.stream.offline import check_files
from tests.kafka.helpers import (
    Deployment,
    by_episode,
    consume,
    halves,
    jsonl_records,
    without_key,
)

pytestmark = pytest.mark.kafka
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "debugging"
BEHIND_MS = 10 * 60_000  # twice the default inactivity (5 min)
# Longer than a few sweeps (0.5 s each, tests/kafka/helpers.py): time for a worker that
# trusted the producer's clock to close the half-sent episodes.
PAUSE_S = 3.0


@pytest.fixture(params=["LogAppendTime", "CreateTime"])
def deployment(
    kafka_broker: KafkaBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Deployment]:
    """`evalstream topics` declares the signals topic LogAppendTime; a signals topic made
    before (CreateTime, the broker's default) keeps its configuration."""
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(EXAMPLE / "suite.yaml")])
    if request.param == "CreateTime":
        asyncio.run(ensure_topics(dep.bootstrap, [dep.topic("signals")], dep.partitions))
    dep.create_topics()
    yield dep
    dep.stop_all()


def renamed(records: list[tuple[bytes, bytes]], suffix: str) -> list[tuple[bytes, bytes]]:
    out = []
    for key, value in records:
        signal = json.loads(value)
        signal["episode_id"] = f"{key.decode()}{suffix}"
        out.append((signal["episode_id"].encode(), json.dumps(signal).encode()))
    return out


async def produce_at(
    bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], offset_ms: int | None
) -> None:
    """Publishes with the producer's clock `offset_ms` off (None: the client's own stamp)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for key, value in records:
            stamp = None if offset_ms is None else int(time.time() * 1000) + offset_ms
            await producer.send(topic, key=key, value=value, timestamp_ms=stamp)
        await producer.flush()
    finally:
        await producer.stop()


def test_a_producer_ten_minutes_behind_gets_the_same_episodes(deployment: Deployment) -> None:
    """On a LogAppendTime topic the clock is the broker's append time; on a CreateTime
    topic the worker reads the producers' stamps as the time it read the record, and says
    how to switch the topic."""
    bootstrap, signals = deployment.bootstrap, deployment.topic("signals")
    timestamp_type = asyncio.run(topic_config(bootstrap, signals))["message.timestamp.type"]
    records = jsonl_records(EXAMPLE / "episodes.jsonl")
    ids = sorted({key.decode() for key, _ in records})
    deployment.start_worker("w1")
    # A first episode on time, to know the worker is consuming before the pause matters.
    warmup = renamed(records, "@warmup")
    asyncio.run(produce_at(bootstrap, signals, warmup, None))
    ready = asyncio.run(consume(bootstrap, deployment.topic("episodes"), until=1, timeout=90))
    assert ready, deployment.logs()

    on_time, behind = renamed(records, "@on-time"), renamed(records, "@behind")
    (first_on_time, rest_on_time), (first_behind, rest_behind) = halves(on_time), halves(behind)
    asyncio.run(produce_at(bootstrap, signals, first_on_time, None))
    asyncio.run(produce_at(bootstrap, signals, first_behind, -BEHIND_MS))
    time.sleep(PAUSE_S)  # the producers pause mid-episode, far shorter than the inactivity
    asyncio.run(produce_at(bootstrap, signals, rest_on_time, None))
    asyncio.run(produce_at(bootstrap, signals, rest_behind, -BEHIND_MS))

    want = 3 * len(ids)
    episodes = by_episode(
        asyncio.run(consume(bootstrap, deployment.topic("episodes"), until=want, timeout=120))
    )
    assert len(episodes) == want, deployment.logs()
    expected = {
        r.episode_id: r.to_json()
        for r in check_files(
            [str(EXAMPLE / "episodes.jsonl")], [load_suite(EXAMPLE / "suite.yaml")]
        ).results
    }
    for episode_id in ids:
        for suffix in ("@on-time", "@behind"):
            [record] = {
                json.dumps(without_key(d), sort_keys=True) for d in episodes[episode_id + suffix]
            }
            got = json.loads(record)
            assert got["episode_id"] == episode_id + suffix
            got["episode_id"] = episode_id
            assert got == expected[episode_id], (episode_id, suffix, got["close_reason"])
    letters = asyncio.run(consume(bootstrap, deployment.topic("dlq"), until=1, timeout=3))
    assert letters == {}, "no signal of a live episode is late"
    log = (deployment.workdir / "w1.log").read_text()
    warned = "--add-config message.timestamp.type=LogAppendTime" in log
    assert warned == (timestamp_type == "CreateTime")
