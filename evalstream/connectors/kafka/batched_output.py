"""Outputs appended to one aiokafka batch per (topic, partition), sent a batch at a time.

Why: `AIOKafkaProducer.send` costs ~19 µs a record (partitioning, accumulator, a future per
record); appending to a `BatchBuilder` and sending it whole costs ~5 µs a record. A closing
episode emits ~20 records (its verdicts and its record), all with the episode id as key, so
the partition is computed once per key. The partition is Kafka's default one (murmur2 of the
key), exactly what `send` would have chosen: readers see the same layout.

Batches are handed to the producer by a task per (topic, partition), never by the caller:
aiokafka's `send_batch` waits while a batch of the same partition is still queued, and it
stays queued until the producer's one request in flight to that broker is answered. Awaited
inline, that wait stalled the worker's processing for a broker round trip (tens of ms under
load: most of the early-verdict latency tail). Meanwhile the partition's next records keep
going into the open batch, which is handed over as soon as the one ahead of it has been.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from typing import Any

from evalstream.connectors.kafka.partitions import KeyPartitions

# Full batches of one partition waiting to be handed over before `append` waits for them:
# the bound on what a slow broker leaves in this process's memory.
MAX_WAITING = 4


class _Slot:
    """One (topic, partition): the batch being filled, and the closed ones not yet handed
    over, in order, each with the future its records' acknowledgement completes."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.builder: Any = None
        self.delivery: asyncio.Future[Any] | None = None  # the open builder's
        self.flush_requested = False  # the open builder leaves after those waiting
        self.waiting: deque[tuple[Any, asyncio.Future[Any]]] = deque()
        self.sender: asyncio.Task[None] | None = None
        self.handed_over: asyncio.Future[None] | None = None  # for `append`'s back pressure


def _forward(delivery: asyncio.Future[Any], acknowledged: asyncio.Future[Any]) -> None:
    if delivery.done():
        return
    if acknowledged.cancelled():
        delivery.cancel()
    elif (exc := acknowledged.exception()) is not None:
        delivery.set_exception(exc)
    else:
        delivery.set_result(acknowledged.result())


class BatchedOutput:
    def __init__(self, producer: Any) -> None:
        self.producer = producer
        self._partitions: dict[str, list[int]] = {}
        self._keys = KeyPartitions()
        self._slots: dict[tuple[str, int], _Slot] = {}
        self._filling: dict[tuple[str, int], _Slot] = {}  # slots with an open builder

    async def add_topics(self, topics: list[str]) -> None:
        """Learns each topic's partitions (once, before the first append)."""
        for topic in topics:
            self._partitions[topic] = sorted(await self.producer.partitions_for(topic))

    def partition_of(self, topic: str, key: bytes) -> int:
        return self._keys.choose(topic, key, self._partitions[topic])

    async def append(
        self, topic: str, key: bytes, value: bytes | None, partition: int | None = None
    ) -> asyncio.Future[Any] | None:
        """Adds one record; returns the delivery future of a batch it filled, if any."""
        if partition is None:
            partition = self.partition_of(topic, key)
        slot_key = (topic, partition)
        slot = self._filling.get(slot_key)
        if slot is None:
            slot = self._open(slot_key)
        if slot.builder.append(key=key, value=value, timestamp=None) is not None:
            return None
        # Full: it leaves; the next one starts (a first record always fits, whatever its size).
        delivery = self._close(slot)
        slot = self._open(slot_key)
        slot.builder.append(key=key, value=value, timestamp=None)
        while len(slot.waiting) > MAX_WAITING:
            if slot.handed_over is None:
                slot.handed_over = asyncio.get_running_loop().create_future()
            await slot.handed_over
        return delivery

    async def flush(self) -> list[asyncio.Future[Any]]:
        """Sends every open batch (once those ahead of it have been handed over); returns
        their delivery futures. Never waits for the broker."""
        futures: list[asyncio.Future[Any]] = []
        for slot in list(self._filling.values()):
            if slot.sender is None:
                futures.append(self._close(slot))
            else:  # its sender takes it once the batches ahead of it are handed over
                slot.flush_requested = True
                assert slot.delivery is not None
                futures.append(slot.delivery)
        return futures

    async def drain(self) -> None:
        """Flushes and waits until the broker acknowledged everything appended so far."""
        await asyncio.gather(*await self.flush())

    def _open(self, slot_key: tuple[str, int]) -> _Slot:
        slot = self._slots.get(slot_key)
        if slot is None:
            slot = self._slots[slot_key] = _Slot(slot_key[0], slot_key[1])
        slot.builder = self.producer.create_batch()
        slot.delivery = asyncio.get_running_loop().create_future()
        self._filling[slot_key] = slot
        return slot

    def _close(self, slot: _Slot) -> asyncio.Future[Any]:
        """Queues the open builder for its sender (started if idle); returns its future."""
        delivery = self._queue_open(slot)
        if slot.sender is None:
            slot.sender = asyncio.ensure_future(self._send(slot))
        return delivery

    def _queue_open(self, slot: _Slot) -> asyncio.Future[Any]:
        delivery = slot.delivery
        assert delivery is not None
        slot.waiting.append((slot.builder, delivery))
        slot.builder = None
        slot.delivery = None
        slot.flush_requested = False
        del self._filling[(slot.topic, slot.partition)]
        return delivery

    async def _send(self, slot: _Slot) -> None:
        """Hands the slot's batches to the producer one after the other, in order."""
        try:
            while True:
                if not slot.waiting:
                    if not slot.flush_requested:
                        return
                    self._queue_open(slot)
                builder, delivery = slot.waiting[0]
                try:
                    acknowledged = await self.producer.send_batch(
                        builder, slot.topic, partition=slot.partition
                    )
                except Exception as exc:  # the producer failed or stopped: so do these records
                    if not delivery.done():
                        delivery.set_exception(exc)
                else:
                    acknowledged.add_done_callback(functools.partial(_forward, delivery))
                slot.waiting.popleft()
                waiter = slot.handed_over
                if waiter is not None:
                    slot.handed_over = None
                    if not waiter.done():
                        waiter.set_result(None)
        finally:
            slot.sender = None
