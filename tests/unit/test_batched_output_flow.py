"""BatchedOutput's hand-over: the caller never waits for the broker, records keep their order.

The producer here keeps aiokafka's rule that matters: `send_batch` waits while a batch of the
same partition is still queued, until the broker takes it (`answer()`). Delivery against the
real broker is tests/kafka/test_batched_output.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evalstream.connectors.kafka.batched_output import MAX_WAITING, BatchedOutput

TOPIC = "out"


class Builder:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.records: list[bytes] = []

    def append(self, *, key: bytes, value: bytes | None, timestamp: None) -> object | None:
        if len(self.records) >= self.capacity:
            return None
        self.records.append(value or b"")
        return object()


class Producer:
    """One queued batch per partition; the broker takes them all at `answer()`."""

    def __init__(self, capacity: int = 1000) -> None:
        self.capacity = capacity
        self.queued: dict[tuple[str, int], tuple[list[bytes], asyncio.Future[int]]] = {}
        self.delivered: list[tuple[int, list[bytes]]] = []
        self.taken = asyncio.Event()
        self.fail_next: Exception | None = None

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1}

    def create_batch(self) -> Builder:
        return Builder(self.capacity)

    async def send_batch(self, builder: Builder, topic: str, partition: int) -> Any:
        while (topic, partition) in self.queued:
            await self.taken.wait()
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.queued[(topic, partition)] = (builder.records, future)
        return future

    def answer(self) -> None:
        for (_, partition), (records, future) in self.queued.items():
            self.delivered.append((partition, records))
            future.set_result(len(records))
        self.queued.clear()
        self.taken.set()
        self.taken = asyncio.Event()


async def settle() -> None:
    for _ in range(10):  # the senders' steps
        await asyncio.sleep(0)


async def new_output(producer: Producer) -> BatchedOutput:
    output = BatchedOutput(producer)
    await output.add_topics([TOPIC])
    return output


@pytest.mark.asyncio
async def test_flush_returns_while_the_partition_has_a_batch_queued() -> None:
    producer = Producer()
    output = await new_output(producer)
    await output.append(TOPIC, b"k", b"1", partition=0)
    first = await output.flush()
    await settle()
    assert (TOPIC, 0) in producer.queued  # the broker has not taken it

    await output.append(TOPIC, b"k", b"2", partition=0)
    flushing = asyncio.ensure_future(output.flush())
    await settle()
    assert flushing.done(), "flush waited for the broker"
    second = flushing.result()  # "2" waits in the sender for "1" to be taken
    await output.append(TOPIC, b"k", b"3", partition=0)
    third = await output.flush()
    await output.append(TOPIC, b"k", b"4", partition=0)  # joins "3": still open
    fourth = await output.flush()
    assert third == fourth != second

    for _ in range(3):
        producer.answer()
        await settle()
    await asyncio.gather(*first, *second, *third)
    assert producer.delivered == [(0, [b"1"]), (0, [b"2"]), (0, [b"3", b"4"])]


@pytest.mark.asyncio
async def test_partitions_do_not_wait_for_each_other() -> None:
    producer = Producer()
    output = await new_output(producer)
    await output.append(TOPIC, b"k", b"a1", partition=0)
    await output.flush()
    await settle()
    await output.append(TOPIC, b"k", b"a2", partition=0)  # waits behind a1
    await output.append(TOPIC, b"k", b"b1", partition=1)
    await output.flush()
    await settle()
    assert producer.queued[(TOPIC, 1)][0] == [b"b1"]  # handed over at once
    assert producer.queued[(TOPIC, 0)][0] == [b"a1"]


@pytest.mark.asyncio
async def test_full_batches_queue_up_to_a_bound_then_append_waits() -> None:
    producer = Producer(capacity=1)
    output = await new_output(producer)
    futures: list[asyncio.Future[Any]] = []

    async def append_many(count: int) -> None:
        for i in range(count):
            future = await output.append(TOPIC, b"k", str(i).encode(), partition=0)
            if future is not None:
                futures.append(future)

    appending = asyncio.ensure_future(append_many(MAX_WAITING + 4))
    await settle()
    assert not appending.done(), "append never pushed back while the broker held everything"
    while not appending.done():
        producer.answer()
        await settle()
    futures.extend(await output.flush())
    while producer.queued or not all(f.done() for f in futures):
        producer.answer()
        await settle()
    await asyncio.gather(*futures)
    values = [value for _, records in producer.delivered for value in records]
    assert values == [str(i).encode() for i in range(MAX_WAITING + 4)]


@pytest.mark.asyncio
async def test_a_failed_hand_over_fails_its_records_only() -> None:
    producer = Producer()
    output = await new_output(producer)
    producer.fail_next = RuntimeError("producer closed")
    await output.append(TOPIC, b"k", b"lost", partition=0)
    (failed,) = await output.flush()
    await settle()
    with pytest.raises(RuntimeError, match="producer closed"):
        await failed
    await output.append(TOPIC, b"k", b"kept", partition=0)
    (kept,) = await output.flush()
    await settle()
    producer.answer()
    assert await kept == 1
    assert producer.delivered == [(0, [b"kept"])]


@pytest.mark.asyncio
async def test_drain_waits_for_every_acknowledgement() -> None:
    producer = Producer()
    output = await new_output(producer)
    await output.append(TOPIC, b"k", b"1", partition=1)
    draining = asyncio.ensure_future(output.drain())
    await settle()
    assert not draining.done()
    producer.answer()
    await draining
    assert producer.delivered == [(1, [b"1"])]
