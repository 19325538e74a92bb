"""Publishing to Kafka with aiokafka: acks=all, idempotent, bounded, never hanging a request.

- `publish` awaits the broker's acknowledgement of every record (acks=all) and raises
  `Unavailable` when that does not happen within `publish_timeout_s`, when the broker cannot
  be reached, or when more than `buffer_bytes` are already waiting for acknowledgement.
  Records of a failed request may still arrive later; clients retry, and the retried copies
  carry the same signal ids, which the worker deduplicates.
- The producer connects in the background: a gateway started before its broker answers 503
  (and `/readyz` says not ready) until the broker is reachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.partitioner import DefaultPartitioner

from connectors.gateway.errors import Unavailable
from connectors.gateway.publisher import OutRecord

log = logging.getLogger("evalstream.gateway")
MAX_BATCH_BYTES = 512 * 1024
RECONNECT_SECONDS = 1.0


class KafkaPublisher:
    def __init__(
        self,
        bootstrap: str,
        topic_of: Callable[[str], str],
        *,
        publish_timeout_s: float = 5.0,
        buffer_bytes: int = 64 * 1024 * 1024,
        linger_ms: int = 2,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic_of = topic_of
        self.publish_timeout_s = publish_timeout_s
        self.buffer_bytes = buffer_bytes
        self.linger_ms = linger_ms
        self.inflight_bytes = 0
        self._producer: AIOKafkaProducer | None = None
        self._connector: asyncio.Task[None] | None = None
        self._topics: dict[str, str] = {}
        self._partitions: dict[tuple[str, bytes], int] = {}
        self._partitioner = DefaultPartitioner()
        self._last_error = "not started"

    def _new_producer(self) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=self.linger_ms,
            max_batch_size=MAX_BATCH_BYTES,
            max_request_size=2 * 1024 * 1024,
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
        None (let aiokafka decide) while the topic's metadata is unknown."""
        cached = self._partitions.get((topic, key))
        if cached is not None:
            return cached
        partitions = producer.client.cluster.partitions_for_topic(topic)
        if not partitions:
            return None
        if len(self._partitions) >= 100_000:
            self._partitions.clear()
        ordered = sorted(partitions)
        chosen: int = self._partitioner(key, ordered, ordered)
        self._partitions[(topic, key)] = chosen
        return chosen

    def _topic(self, stream: str) -> str:
        topic = self._topics.get(stream)
        if topic is None:
            topic = self._topics[stream] = self.topic_of(stream)
        return topic

    async def publish(self, records: Sequence[OutRecord]) -> None:
        producer = self._producer
        if producer is None:
            raise Unavailable("broker_unreachable", self._last_error)
        size = sum(len(r.value) + len(r.key) for r in records)
        if self.inflight_bytes + size > self.buffer_bytes:
            raise Unavailable(
                "buffer_full",
                f"{self.inflight_bytes} bytes await the broker's acknowledgement "
                f"(limit {self.buffer_bytes}); retry later",
            )
        self.inflight_bytes += size
        futures: list[asyncio.Future[object]] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.publish_timeout_s
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    for record in records:
                        topic = self._topic(record.stream)
                        key = record.key.encode("utf-8")
                        futures.append(
                            await producer.send(
                                topic,
                                value=record.value,
                                key=key,
                                partition=self._partition(producer, topic, key),
                            )
                        )
            except TimeoutError:
                raise self._timeout() from None
            except KafkaError as exc:
                raise Unavailable("broker_error", f"Kafka refused the records: {exc}") from exc
            # asyncio.wait, not gather: a timeout must not cancel the delivery futures.
            _, pending = await asyncio.wait(futures, timeout=max(0.0, deadline - loop.time()))
            if pending:
                raise self._timeout()
            for future in futures:
                failure = future.exception()
                if failure is not None:
                    raise Unavailable(
                        "broker_error", f"Kafka refused the records: {failure}"
                    ) from failure
        finally:
            self._release(futures, size)

    def _timeout(self) -> Unavailable:
        return Unavailable(
            "broker_timeout",
            f"Kafka did not acknowledge within {self.publish_timeout_s} s; retry later",
        )

    def _release(self, futures: list[asyncio.Future[object]], size: int) -> None:
        """Count the bytes as buffered until the broker settled every record sent."""
        pending = [f for f in futures if not f.done()]
        if not pending:
            self.inflight_bytes -= size
            return
        remaining = [len(pending)]

        def settled(future: asyncio.Future[object]) -> None:
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
