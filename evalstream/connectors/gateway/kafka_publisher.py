"""Publishing to Kafka with aiokafka: acks=all, idempotent, bounded, never hanging a request.

- `publish` awaits the broker's acknowledgement of every record (acks=all) and raises
  `Unavailable` when that does not happen within `publish_timeout_s`, when the broker cannot
  be reached, or when more than `buffer_bytes` are already waiting for acknowledgement.
  Records of a failed request may still arrive later; clients retry, and the retried copies
  carry the same signal ids, which the worker deduplicates.
- Records are appended straight into aiokafka record batches (`create_batch`/`send_batch`),
  one open batch per partition shared by the concurrent requests, instead of one `send` (and
  one future) per record: a partition's next batch is handed over once the previous one was
  acknowledged, so what arrives meanwhile goes out together, in arrival order, and a full
  batch simply starts the next. A request waits for the acknowledgement of every batch that
  holds one of its records.
- The producer connects in the background: a gateway started before its broker answers 503
  (and `/readyz` says not ready) until the broker is reachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.producer.message_accumulator import BatchBuilder

from evalstream.connectors.gateway.errors import Unavailable
from evalstream.connectors.gateway.publisher import OutRecord
from evalstream.connectors.kafka.partitions import KeyPartitions

log = logging.getLogger("evalstream.gateway")
MAX_BATCH_BYTES = 512 * 1024
MAX_REQUEST_BYTES = 2 * 1024 * 1024
RECORD_OVERHEAD_BYTES = 64  # a record's framing in a v2 batch is at most ~21 bytes; margin
RECONNECT_SECONDS = 1.0


class KafkaPublisher:
    def __init__(
        self,
        bootstrap: str,
        topic_of: Callable[[str], str],
        *,
        publish_timeout_s: float = 5.0,
        buffer_bytes: int = 64 * 1024 * 1024,
        batch_bytes: int = MAX_BATCH_BYTES,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic_of = topic_of
        self.publish_timeout_s = publish_timeout_s
        self.buffer_bytes = buffer_bytes
        self.batch_bytes = batch_bytes
        self.inflight_bytes = 0
        self._producer: AIOKafkaProducer | None = None
        self._connector: asyncio.Task[None] | None = None
        self._topics: dict[str, str] = {}
        self._key_partitions = KeyPartitions()
        self._lanes: dict[tuple[str, int], _Lane] = {}
        self._last_error = "not started"

    def _new_producer(self) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            max_batch_size=self.batch_bytes,
            max_request_size=MAX_REQUEST_BYTES,
            request_timeout_ms=max(int(self.publish_timeout_s * 2000), 5_000),
            retry_backoff_ms=100,
        )

    async def start(self) -> None:
        """Try once now; if the broker is not there, keep trying in the background."""
        if not await self._try_connect():
            self._connector = asyncio.create_task(self._connect_loop())

    async def _try_connect(self) -> bool:
        producer = self._new_producer()
        try:
            await producer.start()
        except (KafkaError, OSError) as exc:
            self._last_error = f"cannot reach Kafka at {self.bootstrap}: {exc}"
            with contextlib.suppress(Exception):
                await producer.stop()
            return False
        self._producer = producer
        return True

    async def _connect_loop(self) -> None:
        while self._producer is None:
            await asyncio.sleep(RECONNECT_SECONDS)
            if await self._try_connect():
                log.info("connected to Kafka at %s", self.bootstrap)

    async def stop(self) -> None:
        pumps = [lane.pump for lane in self._lanes.values() if lane.pump is not None]
        if pumps:  # let what is queued go out (bounded: batches expire with the request timeout)
            await asyncio.wait(pumps, timeout=self.publish_timeout_s)
        for pump in pumps:
            pump.cancel()
        if self._connector is not None:
            self._connector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connector
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await self._close(producer)

    async def _close(self, producer: AIOKafkaProducer) -> None:
        """Flush and close, but never hang: with the broker gone, aiokafka's stop() retries
        its in-flight batches forever. Those records were never acknowledged, so no client
        got a 2xx for them; giving up on them loses nothing that was promised."""
        stopping = asyncio.ensure_future(producer.stop())
        try:
            await asyncio.wait_for(asyncio.shield(stopping), self.publish_timeout_s)
            return
        except TimeoutError:
            log.warning("Kafka did not take the last records within %s s", self.publish_timeout_s)
        # aiokafka has no public way to abandon a send in flight: stop its sender task.
        sender_task = getattr(getattr(producer, "_sender", None), "sender_task", None)
        for task in (sender_task, stopping):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, KafkaError):
                    await task
        await producer.client.close()

    def _partition(self, producer: AIOKafkaProducer, topic: str, key: bytes) -> int | None:
        """The default partitioner's choice, cached per key (episodes send many records);
        None while the topic's metadata is unknown."""
        cached = self._key_partitions.get(topic, key)
        if cached is not None:
            return cached
        partitions = producer.client.cluster.partitions_for_topic(topic)
        if not partitions:
            return None
        return self._key_partitions.choose(topic, key, partitions)

    def _topic(self, stream: str) -> str:
        topic = self._topics.get(stream)
        if topic is None:
            topic = self._topics[stream] = self.topic_of(stream)
        return topic

    async def publish(self, records: Sequence[OutRecord]) -> None:
        producer = self._producer
        if producer is None:
            raise Unavailable("broker_unreachable", self._last_error)
        size = 0
        for record in records:
            size += len(record.value) + len(record.key)
            if len(record.value) + len(record.key) > MAX_REQUEST_BYTES - RECORD_OVERHEAD_BYTES:
                raise Unavailable(
                    "broker_error",
                    f"Kafka refused the records: a record of {len(record.value)} bytes exceeds "
                    f"the largest request ({MAX_REQUEST_BYTES} bytes)",
                )
        if self.inflight_bytes + size > self.buffer_bytes:
            raise Unavailable(
                "buffer_full",
                f"{self.inflight_bytes} bytes await the broker's acknowledgement "
                f"(limit {self.buffer_bytes}); retry later",
            )
        self.inflight_bytes += size
        settled: list[asyncio.Future[None]] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.publish_timeout_s
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    await self._append(producer, records, settled)
            except TimeoutError:
                raise self._timeout() from None
            except KafkaError as exc:
                raise Unavailable("broker_error", f"Kafka refused the records: {exc}") from exc
            if not settled:
                return
            # asyncio.wait, not gather: a timeout must not cancel the shared batch futures.
            _, pending = await asyncio.wait(settled, timeout=max(0.0, deadline - loop.time()))
            if pending:
                raise self._timeout()
            for future in settled:
                failure = future.exception()
                if isinstance(failure, Unavailable):
                    raise failure
                if failure is not None:
                    raise Unavailable(
                        "broker_error", f"Kafka refused the records: {failure}"
                    ) from failure
        finally:
            self._release(settled, size)

    async def _append(
        self,
        producer: AIOKafkaProducer,
        records: Sequence[OutRecord],
        settled: list[asyncio.Future[None]],
    ) -> None:
        """Append every record to its partition's open batch, in order; collect the futures
        of the batches they landed in. Nothing awaits between two appends unless a topic's
        metadata is still unknown, so a request's records of one key stay together."""
        last: asyncio.Future[None] | None = None
        for record in records:
            topic = self._topic(record.stream)
            key = record.key.encode("utf-8")
            partition = self._partition(producer, topic, key)
            if partition is None:
                await producer.partitions_for(topic)  # waits for the topic's metadata
                partition = self._partition(producer, topic, key)
                if partition is None:
                    raise Unavailable("broker_error", f"Kafka has no partitions for {topic!r}")
            lane = self._lanes.get((topic, partition))
            if lane is None:
                lane = self._lanes[(topic, partition)] = _Lane(topic, partition)
            future = lane.append(producer, key, record.value)
            if future is not last:
                if future not in settled:
                    settled.append(future)
                last = future
            if lane.pump is None:
                lane.pump = asyncio.create_task(self._pump(producer, lane))

    async def _pump(self, producer: AIOKafkaProducer, lane: _Lane) -> None:
        """Hand a partition's batches to aiokafka one at a time, each once the previous one
        was acknowledged: what arrives meanwhile coalesces into the next batch (at most one
        batch per partition is in flight anyway, idempotence keeps them in order)."""
        previous: asyncio.Future[object] | None = None
        submitting: _Batch | None = None
        try:
            while True:
                if previous is not None:
                    await asyncio.wait([previous])
                    previous = None
                if not lane.batches:
                    break
                submitting = lane.batches.popleft()
                submitting.builder.close()  # from here on, new records start the next batch
                try:
                    delivered = await producer.send_batch(
                        submitting.builder, lane.topic, partition=lane.partition
                    )
                except Exception as exc:  # every failure belongs to the batch's requests
                    _settle(submitting.settled, exc)
                else:
                    delivered.add_done_callback(functools.partial(_copy, submitting.settled))
                    previous = delivered
                submitting = None
        except asyncio.CancelledError:
            stopping = Unavailable("broker_unreachable", "the gateway is stopping")
            for batch in (submitting, *lane.batches):
                if batch is not None:
                    _settle(batch.settled, stopping)
            lane.batches.clear()
            raise
        finally:
            lane.pump = None

    def _timeout(self) -> Unavailable:
        return Unavailable(
            "broker_timeout",
            f"Kafka did not acknowledge within {self.publish_timeout_s} s; retry later",
        )

    def _release(self, futures: list[asyncio.Future[None]], size: int) -> None:
        """Count the bytes as buffered until the broker settled every record sent."""
        pending = [f for f in futures if not f.done()]
        if not pending:
            self.inflight_bytes -= size
            return
        remaining = [len(pending)]

        def settled(future: asyncio.Future[None]) -> None:
            if not future.cancelled():
                future.exception()  # retrieved: a late failure is not an unhandled error
            remaining[0] -= 1
            if remaining[0] == 0:
                self.inflight_bytes -= size

        for future in pending:
            future.add_done_callback(settled)

    async def ready(self) -> bool:
        producer = self._producer
        if producer is None:
            return False
        try:
            async with asyncio.timeout(2.0):
                await producer.client.fetch_all_metadata()
        except (TimeoutError, KafkaError, OSError):
            return False
        return True


class _Batch:
    """One batch being filled for a partition; `settled` resolves at its acknowledgement."""

    __slots__ = ("builder", "settled")

    def __init__(self, builder: BatchBuilder) -> None:
        self.builder = builder
        self.settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class _Lane:
    """A partition's batches not yet handed to aiokafka, oldest first; the last one is open."""

    __slots__ = ("batches", "partition", "pump", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.batches: deque[_Batch] = deque()
        self.pump: asyncio.Task[None] | None = None

    def append(self, producer: AIOKafkaProducer, key: bytes, value: bytes) -> asyncio.Future[None]:
        batches = self.batches
        if batches:
            batch = batches[-1]
            if batch.builder.append(timestamp=None, key=key, value=value) is not None:
                return batch.settled
        # No open batch, or it is full: start the next one (an empty batch takes any record).
        batch = _Batch(producer.create_batch())
        if batch.builder.append(timestamp=None, key=key, value=value) is None:
            raise Unavailable("broker_error", "Kafka refused the records: a record is too large")
        batches.append(batch)
        return batch.settled


def _settle(future: asyncio.Future[None], failure: BaseException) -> None:
    if not future.done():
        future.set_exception(failure)


def _copy(target: asyncio.Future[None], delivered: asyncio.Future[object]) -> None:
    if target.done():
        return
    failure = None if delivered.cancelled() else delivered.exception()
    if delivered.cancelled():
        target.set_exception(Unavailable("broker_unreachable", "the delivery was cancelled"))
    elif failure is not None:
        target.set_exception(failure)
    else:
        target.set_result(None)
