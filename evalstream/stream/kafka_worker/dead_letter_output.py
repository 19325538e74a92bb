"""Publishing dead letters so that one that cannot be published never stops the worker.

A dead letter is sent on its own (`AIOKafkaProducer.send`, not in a shared batch), so a
rejection concerns that one record only. A record the producer or the broker refuses
(too large for a limit changed on the broker, a broker error after the producer's retries)
is counted in `evalstream_dead_letter_failures_total`, logged once with its reason and
origin, and given up: the partition's commit does not wait for it forever, and the worker
does not crash and replay into the same failure on every restart.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

import orjson

from evalstream.stream.telemetry.metrics import PipelineMetrics

log = logging.getLogger("evalstream.worker")
JSON = Any


class DeadLetterOutput:
    """`producer` may come later; `ready` is set once it and `limit` (the largest message
    the dead-letter topic takes; Kafka's default until the broker says) are known."""

    def __init__(self, producer: Any, topic: str, metrics: PipelineMetrics) -> None:
        self.producer = producer
        self.topic = topic
        self.metrics = metrics
        self.limit = 1_048_576
        self.ready = asyncio.Event()

    async def send(self, key: bytes, record: dict[str, JSON]) -> asyncio.Future[bool]:
        """Hands the record to the producer; the future is True once the broker has it and
        False when it was given up (never an exception)."""
        outcome: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        try:
            delivery = await self.producer.send(self.topic, orjson.dumps(record), key)
        except Exception as exc:  # refused before sending (e.g. over max_request_size)
            self._failed(record, exc)
            outcome.set_result(False)
            return outcome
        delivery.add_done_callback(functools.partial(self._delivered, record, outcome))
        return outcome

    def _delivered(
        self, record: dict[str, JSON], outcome: asyncio.Future[bool], delivery: asyncio.Future[Any]
    ) -> None:
        if delivery.cancelled():
            exc: BaseException | None = asyncio.CancelledError("the producer stopped")
        else:
            exc = delivery.exception()
        if exc is not None:
            self._failed(record, exc)
        if not outcome.done():
            outcome.set_result(exc is None)

    def _failed(self, record: dict[str, JSON], exc: BaseException) -> None:
        reason = str(record.get("reason"))
        self.metrics.dead_letter_failures.labels(reason).inc()
        log.error(
            "dead letter not published and given up (%s: %s): reason %s, %s partition %s offset %s",
            type(exc).__name__,
            exc,
            reason,
            record.get("topic"),
            record.get("partition"),
            record.get("offset"),
        )
