"""The dev/test broker is a real Kafka: partitions, idempotent acks=all produce, groups."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from evalstream.stream.dev_kafka import KEEP_DATA_ENV, KafkaBroker, _free_ports
from tests.kafka.helpers import EXE

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


def _port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.mark.kafka
def test_dev_kafka_killed_with_sigkill_takes_its_broker_along(tmp_path: Path) -> None:
    """SIGKILL leaves `evalstream dev-kafka` no chance to stop its JVM: the kernel kills the
    broker with it (PR_SET_PDEATHSIG), so the port frees."""
    [port] = _free_ports(1)
    out = tmp_path / "dev-kafka.out"
    with out.open("wb") as handle:
        cli = subprocess.Popen(
            [str(EXE), "dev-kafka", "--port", str(port)],
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    broker_pid = None
    try:
        deadline = time.monotonic() + 180
        while broker_pid is None:
            ready = re.search(r"Kafka broker ready at \S+ \(pid (\d+)\)", out.read_text())
            if ready:
                broker_pid = int(ready.group(1))
            assert cli.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        assert _port_accepts(port)
        cli.send_signal(signal.SIGKILL)
        cli.wait()
        deadline = time.monotonic() + 60
        while _port_accepts(port) or _alive(broker_pid):
            assert time.monotonic() < deadline, "the broker outlived dev-kafka"
            time.sleep(0.2)
    finally:
        if cli.poll() is None:
            cli.kill()
        if broker_pid is not None and _alive(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by init) holds no port and runs nothing.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
