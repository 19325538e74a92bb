"""BatchedOutput against the real broker: every record delivered, in order per key, in the
partition `send` would have chosen, across full batches and records larger than a batch."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from evalstream.connectors.kafka.batched_output import BatchedOutput
from evalstream.connectors.kafka.topics import ensure_topics
from evalstream.stream.dev_kafka import KafkaBroker

pytestmark = pytest.mark.kafka


async def _read_all(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    records: list[Any] = []
    try:
        for _ in range(60):
            batch = await consumer.getmany(timeout_ms=500)
            for messages in batch.values():
                records.extend(messages)
            if len(records) >= count:
                break
    finally:
        await consumer.stop()
    return records


async def _run(bootstrap: str) -> None:
    batched, direct = f"bo-{uuid.uuid4().hex[:8]}", f"bo-{uuid.uuid4().hex[:8]}"
    await ensure_topics(bootstrap, [batched, direct], 4, 1)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, max_batch_size=1024
    )
    await producer.start()
    try:
        output = BatchedOutput(producer)
        await output.add_topics([batched])
        keys = [f"episode-{i}".encode() for i in range(20)]
        futures = []
        sent = 0
        for seq in range(15):
            for key in keys:
                # Every 50th record is larger than a whole batch (1 KiB).
                filler = "x" * (3000 if sent % 50 == 0 else 40)
                value = orjson.dumps({"key": key.decode(), "seq": seq, "filler": filler})
                future = await output.append(batched, key, value)
                if future is not None:
                    futures.append(future)
                sent += 1
        futures.extend(await output.flush())
        assert len(futures) > 4, "batches of 1 KiB must have filled up and been sent early"
        await asyncio.gather(*futures)
        expected_partition = {}
        for key in keys:  # where a plain send puts each key
            metadata = await (await producer.send(direct, b"{}", key=key))
            expected_partition[key] = metadata.partition
    finally:
        await producer.stop()

    records = await _read_all(bootstrap, batched, sent)
    assert len(records) == sent
    seqs: dict[bytes, list[int]] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        assert record.partition == expected_partition[record.key]
        seqs.setdefault(record.key, []).append(orjson.loads(record.value)["seq"])
    assert all(seq == list(range(15)) for seq in seqs.values()), seqs


def test_batched_output_delivers_everything_in_order_per_key(kafka_broker: KafkaBroker) -> None:
    asyncio.run(_run(kafka_broker.bootstrap))
