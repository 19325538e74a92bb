"""The dev/test broker is a real Kafka: partitions, idempotent acks=all produce, groups."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from stream.dev_kafka import KEEP_DATA_ENV, KafkaBroker

PARTITIONS = 8
MESSAGES = 100


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
        )
        errors = {entry[0]: entry[1] for entry in response.topic_errors}
        assert errors == {topic: 0}, response
        # A new topic's partitions reach the metadata a moment after the create returns.
        for _ in range(50):
            (described,) = await admin.describe_topics([topic])
            if described["partitions"]:
                break
            await asyncio.sleep(0.1)
        assert len(described["partitions"]) == partitions
    finally:
        await admin.close()


@pytest.mark.kafka
@pytest.mark.asyncio
async def test_keyed_messages_round_trip_through_a_consumer_group(
    kafka_broker: KafkaBroker,
) -> None:
    topic = f"evalstream-test-{uuid.uuid4().hex[:12]}"
    await _create_topic(kafka_broker.bootstrap, topic, PARTITIONS)

    expected: dict[bytes, bytes] = {}  # value -> key; values are unique, keys repeat
    partition_of_key: dict[bytes, int] = {}
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_broker.bootstrap, acks="all", enable_idempotence=True
    )
    await producer.start()
    try:
        for i in range(MESSAGES):
            key, value = f"episode-{i % 25}".encode(), f"signal-{i}".encode()
            metadata = await producer.send_and_wait(topic, value=value, key=key)
            # The default partitioner hashes the key: one key, one partition.
            assert partition_of_key.setdefault(key, metadata.partition) == metadata.partition
            expected[value] = key
    finally:
        await producer.stop()
    assert len(set(partition_of_key.values())) > 1, "keys should spread over partitions"

    received: dict[bytes, bytes] = {}
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_broker.bootstrap,
        group_id=f"evalstream-test-{uuid.uuid4().hex[:12]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        async with asyncio.timeout(30):
            while len(received) < MESSAGES:
                batches = await consumer.getmany(timeout_ms=1000)
                for partition, records in batches.items():
                    for record in records:
                        assert record.key is not None
                        assert record.value is not None
                        assert partition_of_key[record.key] == partition.partition
                        assert record.value not in received, "duplicate delivery"
                        received[record.value] = record.key
        await consumer.commit()  # a group commit exercises the group coordinator too
        # The group's only member owns every partition.
        assert {tp.partition for tp in consumer.assignment()} == set(range(PARTITIONS))
    finally:
        await consumer.stop()

    assert received == expected


@pytest.mark.kafka
def test_second_broker_gets_its_own_ports_and_data_dir(kafka_broker: KafkaBroker) -> None:
    first_ports = {kafka_broker.port, kafka_broker.controller_port}
    with KafkaBroker() as second:
        second_pid = second.pid
        assert second_pid is not None
        assert second.port != second.controller_port
        assert {second.port, second.controller_port}.isdisjoint(first_ports)
        assert second.bootstrap != kafka_broker.bootstrap
        assert second.data_dir is not None
        assert second.data_dir != kafka_broker.data_dir
        second_dir = second.data_dir
    assert not second.running
    with pytest.raises(ProcessLookupError):  # the JVM is gone (and was reaped)
        os.kill(second_pid, 0)
    second.stop()  # idempotent
    if not os.environ.get(KEEP_DATA_ENV):
        assert not second_dir.exists()
    assert kafka_broker.running, "stopping the second broker must not touch the first"
