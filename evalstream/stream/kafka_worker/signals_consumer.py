"""The signals topic read in batches by an aiokafka group consumer, not a faust agent.

Why: faust hands every message through its conductor, an `Event`, a flow-controlled queue,
the stream iterator and two asyncio tasks per message (`Consumer.wait_first`). py-spy put
~80 % of a worker's time there, capping it at 3-6k signals/s. A `getmany()` batch goes to
the worker's pipelines directly; offsets are committed by the worker (resume points, see
`evalstream.stream.kafka_worker.app`), never by the consumer itself.

The group is the worker's `app_id`; faust's own group (llm-calls and observations agents,
timers, the leader's crontab) is `<app_id>-agents`, so the two never share a protocol.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

log = logging.getLogger("evalstream.worker")

Records = Mapping[int, list[Any]]  # partition -> aiokafka ConsumerRecords, in offset order
BATCH_RECORDS = 500  # a batch runs without yielding to the loop: ~10 ms at 20 µs a signal
FETCH_WAIT_MS = 100
PARTITION_FETCH_BYTES = 8 * 1_048_576


class SignalsConsumer:
    """Consumes one topic as a member of a group, handing batches to `on_batch`.

    `on_assigned(partitions)` runs once the group assigned partitions; records of theirs
    may already be in a batch by then (aiokafka fetches as soon as the assignment is set),
    so per-partition state is best made lazily, on a partition's first batch, with
    `start_offset`. `on_revoked(partitions)` runs before they go away (the worker commits
    there). A batch and a revocation never interleave: both hold the same lock."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group_id: str,
        *,
        on_batch: Callable[[Records], Awaitable[None]],
        on_assigned: Callable[[set[int]], Awaitable[None]],
        on_revoked: Callable[[set[int]], Awaitable[None]],
        session_timeout_ms: int = 10_000,
        max_fetch_bytes: int = 1_048_576,
    ) -> None:
        self.topic = topic
        self.on_batch = on_batch
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.lock = asyncio.Lock()
        self._batch: asyncio.Future[None] | None = None
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group_id,
            enable_auto_commit=False,  # the worker commits its resume points itself
            auto_offset_reset="earliest",  # a group without commits starts at the beginning
            session_timeout_ms=session_timeout_ms,  # a killed member is evicted after 10 s
            heartbeat_interval_ms=1_000,
            # aiokafka sends no fetch to a broker while any of its partitions still has
            # buffered records, so the worker waits one fetch round trip per buffer it drains:
            # large fetches make those waits rare (8 MiB: ~20k signals a partition).
            max_partition_fetch_bytes=max(max_fetch_bytes * 2, PARTITION_FETCH_BYTES),
            isolation_level="read_committed",
        )

    async def start(self) -> None:
        await self.consumer.start()
        self.consumer.subscribe([self.topic], listener=_Listener(self))

    async def run(self) -> None:
        """Fetch and hand over batches until cancelled."""
        consumer = self.consumer
        while True:
            batch = await consumer.getmany(timeout_ms=FETCH_WAIT_MS, max_records=BATCH_RECORDS)
            if not batch:
                continue
            await asyncio.sleep(0)  # the fetcher sends its next request while this batch runs
            async with self.lock:
                # Shielded: a stop (cancellation) never cuts a batch in the middle of a
                # record; `settle()` waits for it before the final commit.
                self._batch = asyncio.ensure_future(
                    self.on_batch({tp.partition: records for tp, records in batch.items()})
                )
                await asyncio.shield(self._batch)
            # getmany() returns buffered records without suspending: yield, so the producer's
            # sender ships this batch's verdicts now, not once the fetch buffer runs dry.
            await asyncio.sleep(0)

    async def settle(self) -> None:
        """Waits for the batch in progress, if any (after `run` was cancelled)."""
        if self._batch is not None and not self._batch.done():
            await self._batch

    def assigned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic}

    async def start_offset(self, partition: int) -> int:
        """Where consumption of a newly assigned partition starts: the group's committed
        offset, else (no commit yet) the log's first offset."""
        tp = TopicPartition(self.topic, partition)
        committed = await self.consumer.committed(tp)
        if committed is not None:
            return int(committed)
        return int((await self.consumer.beginning_offsets([tp]))[tp])

    def seek(self, partition: int, offset: int) -> None:
        self.consumer.seek(TopicPartition(self.topic, partition), offset)

    async def commit(self, offsets: Mapping[int, int]) -> bool:
        """Commits the given next offsets; False when the group moved on (a rebalance)."""
        try:
            await self.consumer.commit(
                {TopicPartition(self.topic, p): offset for p, offset in offsets.items()}
            )
        except KafkaError as exc:  # e.g. CommitFailedError during a rebalance: replay covers it
            log.warning("commit of %s failed: %r", dict(offsets), exc)
            return False
        return True

    async def end_offsets(self, partitions: set[int]) -> dict[int, int]:
        tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        ends = await self.consumer.end_offsets(tps)
        return {tp.partition: offset for tp, offset in ends.items()}

    async def stop(self) -> None:
        await self.consumer.stop()  # leaves the group: the others take over at once


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc] # aiokafka is untyped
    def __init__(self, owner: SignalsConsumer) -> None:
        self.owner = owner

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        owner = self.owner
        async with owner.lock:  # the batch in progress finishes first
            await owner.on_revoked({tp.partition for tp in revoked if tp.topic == owner.topic})

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        owner = self.owner
        await owner.on_assigned({tp.partition for tp in assigned if tp.topic == owner.topic})
