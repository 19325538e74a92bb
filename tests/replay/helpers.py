"""Helpers of the record/replay tests: run the CLI, create topics, read topics raw."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from evalstream.connectors.files.recording import RecordedMessage, RecordingReader

EXE = Path(sys.executable).parent / "evalstream"
REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=REPO,
        env=env,
    )


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Creates a topic and waits until the broker's metadata shows all its partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
        deadline = time.monotonic() + 30
        while True:
            [described] = await admin.describe_topics([name])
            if len(described["partitions"]) == partitions:
                return
            assert time.monotonic() < deadline, described
            await asyncio.sleep(0.2)
    finally:
        await admin.close()


async def read_topic(
    bootstrap: str, topic: str, *, count: int, timeout: float = 30
) -> list[RecordedMessage]:
    """Every message of a topic (until `count`), partition by partition in offset order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    out: list[RecordedMessage] = []
    try:
        cluster = await consumer._client.fetch_all_metadata()  # every topic's partitions
        partitions = sorted(cluster.partitions_for_topic(topic) or ())
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=300)
            for records in batch.values():
                out.extend(
                    RecordedMessage(
                        r.topic,
                        r.partition,
                        r.offset,
                        r.timestamp,
                        r.key,
                        r.value,
                        tuple(r.headers or ()),
                    )
                    for r in records
                )
    finally:
        await consumer.stop()
    return sorted(out, key=lambda m: (m.partition, m.offset))


def read_recording(path: Path) -> list[RecordedMessage]:
    with RecordingReader(path) as reader:
        return list(reader)
