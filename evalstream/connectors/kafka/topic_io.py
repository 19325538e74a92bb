"""Reading a slice of a topic and producing messages back, with aiokafka.

`TopicReader` reads one topic without a consumer group (nothing is committed, live
consumers are not disturbed): from the beginning, from given offsets or from a timestamp,
up to the end offsets seen at start, up to a timestamp, or following the topic live. Both
time bounds are turned into offsets by the broker's time index (`offsets_for_times`), so the
planned number of messages is known before reading and a progress bar can show it.

`TopicWriter` produces messages with their key, headers and (optionally) their original
timestamps; memory stays bounded because at most `window` deliveries are in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from evalstream.assertions.errors import InputError
from evalstream.connectors.files.recording import RecordedMessage

FETCH_TIMEOUT_MS = 500
MAX_RECORDS_PER_FETCH = 500


class TopicNotFoundError(InputError):
    """The topic does not exist on the broker."""


@dataclass(frozen=True)
class TopicSlice:
    """Which messages of a topic to read.

    `start_offsets` maps a partition to its first offset; the key -1 stands for every
    partition not named. `start_ms` / `end_ms` are timestamps (epoch ms, end exclusive).
    Without an end, reading stops at the end offsets seen at start, unless `follow`.
    """

    topic: str
    partitions: Sequence[int] | None = None
    start_offsets: Mapping[int, int] = field(default_factory=dict)
    start_ms: int | None = None
    end_ms: int | None = None
    follow: bool = False


@dataclass
class Plan:
    """Resolved offsets per partition: read [start, end); end None = follow."""

    start: dict[int, int]
    end: dict[int, int | None]

    @property
    def total(self) -> int | None:
        if any(e is None for e in self.end.values()):
            return None
        return sum(max(0, (self.end[p] or 0) - s) for p, s in self.start.items())


class TopicReader:
    """Async iterator of the messages of a `TopicSlice`, in per-partition order.

    Call `start()` first (it resolves the plan), iterate, then `stop()`. Setting `halt`
    ends the iteration after the message being handed out, so a caller can stop cleanly."""

    def __init__(self, bootstrap: str, slice_: TopicSlice) -> None:
        self.bootstrap = bootstrap
        self.slice = slice_
        self.halt = asyncio.Event()
        self.plan = Plan({}, {})
        self._consumer: Any = None

    async def start(self) -> Plan:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # a start offset already deleted: the oldest kept
            isolation_level="read_committed",
        )
        await consumer.start()
        self._consumer = consumer
        try:
            self.plan = await self._resolve(consumer)
        except BaseException:
            await self.stop()
            raise
        return self.plan

    async def _resolve(self, consumer: Any) -> Plan:
        topic = self.slice.topic
        known = await _partitions(consumer, topic)
        wanted = sorted(self.slice.partitions) if self.slice.partitions is not None else known
        unknown = sorted(set(wanted) - set(known))
        if unknown:
            raise InputError(
                f"topic {topic!r} has no partition {unknown[0]}; "
                f"its partitions are 0..{len(known) - 1}"
            )
        tps = [TopicPartition(topic, p) for p in wanted]
        consumer.assign(tps)
        first = await consumer.beginning_offsets(tps)
        last = await consumer.end_offsets(tps)
        start: dict[int, int] = {}
        for tp in tps:
            offset = self.slice.start_offsets.get(
                tp.partition, self.slice.start_offsets.get(-1, first[tp])
            )
            start[tp.partition] = max(first[tp], min(offset, last[tp]))
        if self.slice.start_ms is not None:
            at = await consumer.offsets_for_times(dict.fromkeys(tps, self.slice.start_ms))
            for tp in tps:
                found = at.get(tp)
                by_time = found.offset if found is not None else last[tp]
                start[tp.partition] = max(start[tp.partition], by_time)
        end: dict[int, int | None] = {}
        for tp in tps:
            end[tp.partition] = None if self.slice.follow else last[tp]
        if self.slice.end_ms is not None:
            at = await consumer.offsets_for_times(dict.fromkeys(tps, self.slice.end_ms))
            for tp in tps:
                found = at.get(tp)
                end[tp.partition] = found.offset if found is not None else last[tp]
        for tp in tps:
            consumer.seek(tp, start[tp.partition])
        return Plan(start, end)

    async def messages(self) -> AsyncIterator[RecordedMessage]:
        consumer = self._consumer
        assert consumer is not None, "call start() first"
        topic = self.slice.topic
        active = {p for p, s in self.plan.start.items() if _before_end(s, self.plan.end[p])}
        while active and not self.halt.is_set():
            batch = await consumer.getmany(
                *[TopicPartition(topic, p) for p in sorted(active)],
                timeout_ms=FETCH_TIMEOUT_MS,
                max_records=MAX_RECORDS_PER_FETCH,
            )
            for tp, records in batch.items():
                end = self.plan.end.get(tp.partition)
                for record in records:
                    if end is not None and record.offset >= end:
                        break
                    yield RecordedMessage(
                        topic=record.topic,
                        partition=record.partition,
                        offset=record.offset,
                        timestamp_ms=record.timestamp,
                        key=record.key,
                        value=record.value,
                        headers=tuple((k, v) for k, v in (record.headers or ())),
                    )
                    if self.halt.is_set():
                        return
            for p in list(active):
                end = self.plan.end[p]
                if end is not None and await consumer.position(TopicPartition(topic, p)) >= end:
                    active.discard(p)

    async def stop(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            await consumer.stop()


def _before_end(offset: int, end: int | None) -> bool:
    return end is None or offset < end


async def _partitions(consumer: Any, topic: str) -> list[int]:
    # The consumer's public calls only know topics it subscribed to; ask for all metadata.
    cluster = await consumer._client.fetch_all_metadata()
    partitions = cluster.partitions_for_topic(topic)
    if not partitions:
        raise TopicNotFoundError(
            f"topic {topic!r} does not exist on the broker; check the name "
            "(`evalstream topics` creates evalstream's topics)"
        )
    return sorted(partitions)


class TopicWriter:
    """Produces messages to one topic with acks from all replicas.

    A keyed message goes where its key decides (Kafka's default murmur2 partitioner, as
    evalstream's producers use): the worker dead-letters a keyed record found on any other
    partition, and a recording may come from a topic with another partition count or be
    renamed. An episode's messages share a key, so they stay together and in order. An
    unkeyed message keeps its recorded partition when the topic has it, and so does every
    message with `keep_partitions` (a faithful copy of a topic not partitioned by key).
    `keep_timestamps` produces each message with its recorded timestamp."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        keep_timestamps: bool = True,
        window: int = 1000,
        keep_partitions: bool = False,
    ) -> None:
        self.bootstrap = bootstrap
        self.keep_partitions = keep_partitions
        self.topic = topic
        self.keep_timestamps = keep_timestamps
        self.window = window
        self.sent = 0
        self._producer: Any = None
        self._partition_set: frozenset[int] = frozenset()
        self._inflight: list[asyncio.Future[Any]] = []

    async def start(self) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            max_request_size=4 * 1_048_576,
        )
        await producer.start()
        self._producer = producer
        try:
            partitions = await asyncio.wait_for(producer.partitions_for(self.topic), 20)
        except (TimeoutError, KafkaError) as exc:
            await self.stop()
            raise TopicNotFoundError(
                f"topic {self.topic!r} does not exist on the broker (or is unreachable); "
                "create it first, e.g. `evalstream topics --topic-prefix PREFIX`"
            ) from exc
        self._partition_set = frozenset(partitions)

    async def send(self, msg: RecordedMessage) -> None:
        keep = (self.keep_partitions or msg.key is None) and msg.partition in self._partition_set
        partition = msg.partition if keep else None
        future = await self._producer.send(
            self.topic,
            value=msg.value,
            key=msg.key,
            partition=partition,
            timestamp_ms=msg.timestamp_ms if self.keep_timestamps else None,
            headers=list(msg.headers) or None,
        )
        self._inflight.append(future)
        self.sent += 1
        if len(self._inflight) >= self.window:
            await self._settle()

    async def _settle(self) -> None:
        inflight, self._inflight = self._inflight, []
        await asyncio.gather(*inflight)

    async def flush(self) -> None:
        await self._producer.flush()
        await self._settle()

    async def stop(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await producer.stop()
