"""The Kafka publisher's batched path against the real broker: records of several partitions,
batches that overflow, concurrent requests sharing a partition's open batch. Every record
must arrive exactly once, in order per key, and be in the log when `publish` returns (and so
when the gateway answers 202)."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from starlette.testclient import TestClient

from evalstream.connectors.gateway import GatewaySettings, KafkaPublisher, create_gateway_app
from evalstream.connectors.gateway.publisher import SIGNALS, OutRecord
from evalstream.stream.dev_kafka import KafkaBroker
from tests.gateway.live import Message, bearer, create_topics, read_topic, token_env

pytestmark = pytest.mark.kafka

PARTITIONS = 4
SMALL_BATCH = 2048  # a few records per batch: every request below overflows several


def records(request: int, keys: list[str], per_key: int) -> list[OutRecord]:
    """`per_key` records for each key, interleaved, each ~150 bytes and numbered per key."""
    out = []
    for n in range(per_key):
        for key in keys:
            value = {"request": request, "key": key, "n": n, "pad": "x" * 100}
            out.append(OutRecord(SIGNALS, key, orjson.dumps(value)))
    return out


async def end_offsets(bootstrap: str, topic: str) -> int:
    """The number of records in the topic's log right now (it started empty)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return sum((await consumer.end_offsets(partitions)).values())
    finally:
        await consumer.stop()


def check_order(messages: list[Message], sent: list[OutRecord]) -> None:
    """Each record exactly once, and each request's records of a key in the order sent."""
    values = [orjson.loads(r.value) for r in sent]
    expected = sorted((v["request"], v["key"], v["n"]) for v in values)
    got = sorted((m.value["request"], m.value["key"], m.value["n"]) for m in messages)
    assert got == expected  # nothing lost, nothing twice
    log: dict[tuple[int, str], list[int]] = defaultdict(list)
    partition_of: dict[str, set[int]] = defaultdict(set)
    for message in messages:  # read_topic returns each partition's messages in log order
        assert message.key == message.value["key"]
        log[(message.value["request"], message.key)].append(message.value["n"])
        partition_of[message.key].add(message.partition)
    for numbers in log.values():
        assert numbers == sorted(numbers)
    assert all(len(p) == 1 for p in partition_of.values())  # a key stays in one partition


async def publish_and_read(
    bootstrap: str, requests: list[list[OutRecord]]
) -> tuple[list[int], list[Message]]:
    topic = f"batched-{uuid.uuid4().hex[:8]}.signals"
    await create_topics(bootstrap, [topic], PARTITIONS)
    publisher = KafkaPublisher(bootstrap, lambda _stream: topic, batch_bytes=SMALL_BATCH)
    await publisher.start()
    counted: list[int] = []
    try:

        async def one(batch: list[OutRecord]) -> None:
            await publisher.publish(batch)
            # Returned: every record of this request is in the log already.
            counted.append(await end_offsets(bootstrap, topic))

        await asyncio.gather(*(one(batch) for batch in requests))
    finally:
        await publisher.stop()
    total = sum(len(batch) for batch in requests)
    return counted, await read_topic(bootstrap, topic, until=total)


def test_one_request_over_several_partitions_and_overflowing_batches(
    kafka_broker: KafkaBroker,
) -> None:
    keys = [f"acme/ep-{n}" for n in range(6)]  # 6 keys over 4 partitions
    sent = records(0, keys, 40)  # 240 records of ~170 bytes: >10 batches of 2 KiB
    counted, messages = asyncio.run(publish_and_read(kafka_broker.bootstrap, [sent]))
    assert counted == [len(sent)]
    check_order(messages, sent)


def test_concurrent_requests_share_partitions_and_keys(kafka_broker: KafkaBroker) -> None:
    shared = "acme/shared"
    requests = [records(r, [shared, f"acme/own-{r}"], 30) for r in range(8)]
    counted, messages = asyncio.run(publish_and_read(kafka_broker.bootstrap, requests))
    sizes = sorted(len(batch) for batch in requests)
    # When the i-th request returned, at least the records of i requests were in the log.
    for i, count in enumerate(sorted(counted)):
        assert count >= sum(sizes[: i + 1])
    check_order(messages, [r for batch in requests for r in batch])


def test_the_gateway_answers_202_with_every_record_in_the_log(kafka_broker: KafkaBroker) -> None:
    topic_prefix = f"batched-{uuid.uuid4().hex[:8]}."
    asyncio.run(create_topics(kafka_broker.bootstrap, [topic_prefix + "signals"], PARTITIONS))
    publisher = KafkaPublisher(
        kafka_broker.bootstrap, lambda stream: topic_prefix + stream, batch_bytes=SMALL_BATCH
    )
    app = create_gateway_app(GatewaySettings(tokens=token_env()), publisher)
    body = b"\n".join(
        orjson.dumps(
            {"episode_id": f"ep-{i % 5}", "name": "tool:call", "timestamp": i, "seq": i}
            | {"payload": {"pad": "y" * 200}}
        )
        for i in range(300)
    )
    with TestClient(app) as http:
        response = http.post(
            "/v1/signals",
            content=body,
            headers={**bearer("acme"), "content-type": "application/x-ndjson"},
        )
        assert response.status_code == 202, response.text
        assert response.json()["accepted"] == 300
        in_log = asyncio.run(end_offsets(kafka_broker.bootstrap, topic_prefix + "signals"))
    assert in_log == 300
    messages = asyncio.run(read_topic(kafka_broker.bootstrap, topic_prefix + "signals", until=300))
    per_episode: dict[str, list[int]] = defaultdict(list)
    for message in messages:
        assert message.value["attrs"] == {"tenant": "acme"}
        per_episode[message.key].append(message.value["seq"])
    assert sorted(per_episode) == [f"acme/ep-{n}" for n in range(5)]
    for seqs in per_episode.values():
        assert seqs == sorted(seqs)
        assert len(seqs) == 60
