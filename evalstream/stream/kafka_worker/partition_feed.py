"""One assigned partition of the signals topic: its state and the per-record loop.

Kept apart from `evalstream.stream.kafka_worker.app` (faust, timers, commits): this loop runs once
per consumed signal, and stays free of the framework. What a record needs
beyond the pipeline — a control record, a signal of a closed episode, markers to publish,
a hole in the offsets — is delegated to the worker through `PartitionHooks`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import orjson

from evalstream.connectors.kafka.batched_output import BatchedOutput
from evalstream.stream.kafka_worker.dead_letter_output import DeadLetterOutput
from evalstream.stream.pipeline import ALERTS, DLQ, Envelope, Pipeline

log = logging.getLogger("evalstream.worker")

CONTROL_NAME = "evalstream:close"  # reserved signal name of a control record
CONTROL_PREFIX = b'{"name":"' + CONTROL_NAME.encode()  # how a control record's bytes start
LOG_APPEND_TIME = 1  # a record's timestamp_type when the broker set its timestamp
Marker = dict[str, Any]  # {"offset": close offset, "closed_at": epoch s, "partition": p}


class PartitionState:
    """What the worker keeps per assigned partition (see `evalstream.stream.kafka_worker.app` for
    the protocol of offsets, markers and commits)."""

    __slots__ = (
        "close_requested",
        "current_offset",
        "first_offset",
        "gap_checked",
        "last_committed",
        "markers",
        "next_offset",
        "partition",
        "pending",
        "pipeline",
        "stream_time_ms",
        "unsent_markers",
    )

    def __init__(self, partition: int, pipeline: Pipeline, next_offset: int) -> None:
        self.partition = partition
        self.pipeline = pipeline
        self.next_offset = next_offset
        # Open episodes' first offsets, inserted in offset order: the resume point.
        self.first_offset: dict[str, int] = {}
        self.stream_time_ms = 0.0
        self.pending: list[asyncio.Future[Any]] = []  # unacknowledged outputs
        self.last_committed: int | None = None
        self.close_requested: set[str] = set()
        self.current_offset = -1
        self.gap_checked: int | None = None  # the expected offset a hole was last re-read from
        self.markers: dict[str, Marker] = {}  # closed episodes by id
        self.unsent_markers: list[tuple[str, Marker]] = []

    def resume_offset(self) -> int:
        for offset in self.first_offset.values():
            return offset  # the oldest open episode
        return self.next_offset


class AlertOffer(Protocol):
    def offer(self, alert: Mapping[str, Any]) -> int: ...


class SinkOwner(Protocol):
    """Where a partition's outputs go (the worker: its producer is made after start-up)."""

    @property
    def output(self) -> BatchedOutput: ...

    @property
    def out_names(self) -> dict[str, str]: ...

    @property
    def alert_sinks(self) -> AlertOffer | None: ...

    @property
    def dead_letters(self) -> DeadLetterOutput: ...


class PartitionSink:
    """Publishes a partition's outputs into the worker's batches; their delivery futures
    gate the partition's next commit (`PartitionState.pending`)."""

    def __init__(self, owner: SinkOwner) -> None:
        self.owner = owner
        self.state: PartitionState | None = None  # set once the state exists

    async def publish(self, stream: str, key: str, record: dict[str, Any]) -> None:
        owner = self.owner
        if stream == DLQ:  # on its own: a refused dead letter concerns no other record
            sent = await owner.dead_letters.send(key.encode(), record)
            if self.state is not None:
                self.state.pending.append(sent)
            return
        future = await owner.output.append(
            owner.out_names[stream], key.encode(), orjson.dumps(record)
        )
        if future is not None and self.state is not None:
            self.state.pending.append(future)
        if stream == ALERTS:
            sinks = owner.alert_sinks
            if sinks is not None:
                sinks.offer(record)


class PartitionHooks(Protocol):
    """The worker's side of the loop."""

    async def control_or_closed(
        self, state: PartitionState, env: Envelope, episode_id: str
    ) -> bool:
        """Handles a control record or a signal of a closed episode; True when consumed."""
        ...

    async def send_markers(self, state: PartitionState) -> None: ...

    def seek(self, partition: int, offset: int) -> None: ...

    @property
    def partition_of(self) -> Callable[[bytes], int]:
        """The partition of the signals topic that a key belongs to (murmur2)."""
        ...


def wrong_partition_message(key: bytes, expected: int, partition: int) -> str:
    return (
        f"message key {key.decode('utf-8', 'replace')!r} belongs to partition {expected} "
        f"(murmur2 of the key, as Kafka's Java client and aiokafka choose it) but arrived on "
        f"partition {partition}: its episode would be split. Publish with a murmur2 "
        "partitioner (kcat / librdkafka: -X topic.partitioner=murmur2_random)"
    )


async def feed_records(
    state: PartitionState, records: list[Any], topic: str, hooks: PartitionHooks
) -> None:
    """Feeds a fetched batch of one partition (aiokafka ConsumerRecords, in offset order) to
    its pipeline, counting the consumed signals once for the batch."""
    pipeline = state.pipeline
    open_episodes = pipeline.assembler.open
    markers = state.markers
    first_offset = state.first_offset
    partition_of = hooks.partition_of
    consumed = 0
    read_ms = time.time() * 1000.0
    try:
        for record in records:
            offset: int = record.offset
            if offset < state.next_offset:
                continue  # a re-delivery of what this assignment already processed
            if offset > state.next_offset and state.gap_checked != state.next_offset:
                # Never process past a hole: read again from the expected offset. If the same
                # record comes first again, the hole holds no records (transaction markers take
                # offsets too) and processing goes on.
                log.warning(
                    "partition %s: expected offset %s, got %s; reading again",
                    state.partition,
                    state.next_offset,
                    offset,
                )
                state.gap_checked = state.next_offset
                hooks.seek(state.partition, state.next_offset)
                break
            state.next_offset = offset + 1
            state.current_offset = offset
            timestamp = record.timestamp
            # The partition's clock: the broker's append time, never a producer's CreateTime
            # (a producer minutes behind would close live episodes); a CreateTime record
            # counts when it was read.
            if timestamp and record.timestamp_type == LOG_APPEND_TIME:
                now_ms = float(timestamp)
            else:
                now_ms = read_ms
            state.stream_time_ms = max(state.stream_time_ms, now_ms)
            key: bytes | None = record.key
            value: bytes | None = record.value
            if value is None:
                value = b""
            env = Envelope(topic, value, key, state.partition, offset, int(timestamp or now_ms))
            episode_id = None if key is None else key.decode("utf-8", "replace")
            if key is not None and (expected := partition_of(key)) != state.partition:
                # Never a second instance of an episode whose signals are elsewhere.
                consumed += 1
                await pipeline.dead_letter(
                    env, "wrong_partition", wrong_partition_message(key, expected, state.partition)
                )
            elif (
                episode_id is None
                # Only a control record or a signal of a closed episode needs the slow path.
                or not (episode_id in markers or value.startswith(CONTROL_PREFIX))
                or not await hooks.control_or_closed(state, env, episode_id)
            ):
                consumed += 1
                # `Pipeline.handle`, awaiting only where the record left output.
                if pipeline.ingest(env, now_ms):
                    await pipeline.flush()
                if (
                    episode_id is not None
                    and episode_id not in first_offset
                    and episode_id in open_episodes
                ):
                    first_offset[episode_id] = offset
            if state.unsent_markers:
                await hooks.send_markers(state)
    finally:
        pipeline.count_consumed(topic, consumed)
