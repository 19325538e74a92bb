"""One episode, one partition, with a foreign producer beside evalstream's own: the real
`kcat` with the documented `-X topic.partitioner=murmur2_random` keeps episodes whole, and a
record on another partition than its key's (kcat's default partitioner) is dead-lettered as
`wrong_partition`, never evaluated as a second episode."""

from __future__ import annotations

import asyncio
import subprocess
import zlib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.partitioner import DefaultPartitioner

from evalstream.assertions.suite_format.suites import load_suite
from evalstream.stream.dev_kafka import KafkaBroker
from evalstream.stream.offline import check_files
from tests.kafka.helpers import (
    Deployment,
    consume,
    consume_raw,
    jsonl_records,
    produce,
    without_key,
)

pytestmark = pytest.mark.kafka
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-review"
KCAT = "/usr/bin/kcat"
MURMUR2 = ["-X", "topic.partitioner=murmur2_random"]  # what README.md and docs/ tell users
PARTITIONS = 8


@pytest.fixture
def deployment(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[Deployment]:
    dep = Deployment(
        kafka_broker.bootstrap, tmp_path, [str(EXAMPLE / "suite.yaml")], partitions=PARTITIONS
    )
    dep.create_topics()
    yield dep
    dep.stop_all()


def kcat_produce(
    bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], *args: str
) -> None:
    """Publishes `key|value` lines with the real kcat, as the README's command does."""
    lines = b"".join(key + b"|" + value + b"\n" for key, value in records)
    proc = subprocess.run(
        [KCAT, "-P", "-b", bootstrap, "-t", topic, "-K|", *args],
        input=lines,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()


def murmur2_partition(key: bytes) -> int:
    ordered = list(range(PARTITIONS))
    return int(DefaultPartitioner()(key, ordered, ordered))


def kcat_consume(bootstrap: str, topic: str, count: int) -> list[tuple[bytes, int]]:
    """(key, partition) of the first `count` records, read with kcat."""
    proc = subprocess.run(
        [KCAT, "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-c", str(count), "-f", "%k|%p\n"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    out = []
    for line in proc.stdout.splitlines():
        key, _, partition = line.rpartition(b"|")
        out.append((key, int(partition)))
    return out


def test_kcat_murmur2_random_places_keys_as_evalstream_does(deployment: Deployment) -> None:
    """librdkafka's murmur2_random is the Java client's (and aiokafka's) partitioner for keyed
    messages; its default, consistent_random (CRC32), is not."""
    keys = [f"episode-{i}".encode() for i in range(200)]
    topic = deployment.topic("signals")
    kcat_produce(deployment.bootstrap, topic, [(k, b"{}") for k in keys], *MURMUR2)
    placed = kcat_consume(deployment.bootstrap, topic, len(keys))
    assert len(placed) == len(keys)
    assert dict(placed) == {k: murmur2_partition(k) for k in keys}
    crc32 = {k: zlib.crc32(k) % PARTITIONS for k in keys}
    assert sum(crc32[k] != murmur2_partition(k) for k in keys) > 100  # the default differs


def test_kcat_beside_evalstreams_producer_keeps_each_episode_whole(
    deployment: Deployment,
) -> None:
    """The first half of every episode's signals is published by kcat (with the documented
    partitioner), the rest by aiokafka: each episode is evaluated once, as `check` does."""
    deployment.start_worker("w1")
    records = jsonl_records(EXAMPLE / "episodes.jsonl")
    by_episode: dict[bytes, list[tuple[bytes, bytes]]] = defaultdict(list)
    for key, value in records:
        by_episode[key].append((key, value))
    first = [r for rs in by_episode.values() for r in rs[: len(rs) // 2]]
    second = [r for rs in by_episode.values() for r in rs[len(rs) // 2 :]]
    topic = deployment.topic("signals")
    kcat_produce(deployment.bootstrap, topic, first, *MURMUR2)
    asyncio.run(produce(deployment.bootstrap, topic, second))
    expected = check_files([str(EXAMPLE / "episodes.jsonl")], [load_suite(EXAMPLE / "suite.yaml")])
    episodes = asyncio.run(
        consume(
            deployment.bootstrap,
            deployment.topic("episodes"),
            until=len(expected.results) + 1,  # one more than expected: waits out any phantom
            timeout=30,
        )
    )
    got = {d[0]["episode_id"]: d for d in episodes.values()}
    assert len(episodes) == len(got) == len(expected.results), deployment.logs()
    for result in expected.results:
        deliveries = got[result.episode_id]
        assert all(without_key(d) == result.to_json() for d in deliveries), result.episode_id
    letters = asyncio.run(
        consume_raw(deployment.bootstrap, deployment.topic("dlq"), until=1, timeout=3)
    )
    assert letters == []


def test_a_record_on_the_wrong_partition_is_dead_lettered(deployment: Deployment) -> None:
    """kcat's default partitioner puts these keys on other partitions than murmur2 does:
    each record is a `wrong_partition` dead letter, and no episode is made of them, while an
    episode published by evalstream's own producer is evaluated as usual."""
    deployment.start_worker("w1")
    records = jsonl_records(EXAMPLE / "episodes.jsonl")
    keys = list(dict.fromkeys(k for k, _ in records))
    misplaced = [k for k in keys if zlib.crc32(k) % PARTITIONS != murmur2_partition(k)]
    assert misplaced, "the example has keys that the two partitioners place differently"
    wrong_key = misplaced[0]
    others = [k for k in keys if k != wrong_key]
    topic = deployment.topic("signals")
    wrong = [r for r in records if r[0] == wrong_key]
    kcat_produce(deployment.bootstrap, topic, wrong)  # kcat's default: consistent_random
    asyncio.run(produce(deployment.bootstrap, topic, [r for r in records if r[0] in others]))
    letters = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("dlq"), until=len(wrong), timeout=60)
    )
    assert len(letters) == len(wrong), deployment.logs()
    for [letter] in letters.values():
        assert letter["reason"] == "wrong_partition"
        assert letter["partition"] == zlib.crc32(wrong_key) % PARTITIONS
        assert f"belongs to partition {murmur2_partition(wrong_key)}" in letter["message"]
        assert "-X topic.partitioner=murmur2_random" in letter["message"]
    episodes = asyncio.run(
        consume(
            deployment.bootstrap, deployment.topic("episodes"), until=len(others) + 1, timeout=30
        )
    )
    assert {d[0]["episode_id"] for d in episodes.values()} == {k.decode() for k in others}
