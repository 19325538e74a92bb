"""`evalstream replay` (dry mode): recorded messages back into a topic, the embedded runtime
or an offline check, with the current suites.

Sources are recording files or a slice of a topic; targets are a Kafka topic (a worker
evaluates it), the in-process pipeline printing results as they come (`embedded`), or a
check report (`check`). Episode ids can be rewritten (prefix / suffix) so a replay never
merges with live episodes, and the original timing can be reproduced at a speed factor.

Targets other than a topic evaluate in event time, as `evalstream check` does, and drop the
worker's close-control records (a worker logs its close decisions in the signals topic; in
a topic replay they reproduce the original episode boundaries, offline they are not input).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from evalstream.assertions.evaluation.assembly import CloseRules
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.file_kinds import FileKind
from evalstream.assertions.judge.protocol import Judge
from evalstream.assertions.reports.check_report import CheckReport, RejectedInput
from evalstream.assertions.suite_format.suites import Suite
from evalstream.assertions.wire.pricing import PricingTable
from evalstream.connectors.files.file_kinds import expecting
from evalstream.connectors.files.recording import EpisodeRename, RecordedMessage, RecordingReader
from evalstream.connectors.kafka.topic_io import TopicReader, TopicWriter
from evalstream.stream.pipeline import DLQ, Envelope, Pipeline, Sink
from evalstream.stream.telemetry.metrics import PipelineMetrics

JSON = Any
# The worker's close-control records start with these bytes
# (evalstream.stream.kafka_worker.app.CONTROL_NAME).
CONTROL_PREFIX = b'{"name":"evalstream:close"'
LLM_TOPIC_SUFFIX = "llm-calls"
YIELD_EVERY = 256  # file reading is synchronous: let the loop breathe (signals, pacing)


def is_control(msg: RecordedMessage) -> bool:
    return msg.value is not None and msg.value.startswith(CONTROL_PREFIX)


# --- sources -------------------------------------------------------------------------------


class Source(Protocol):
    """Recorded messages, with a measure of progress (`unit` of `completed()` / `total`)."""

    unit: str
    total: int | None

    def completed(self) -> int: ...

    def messages(self) -> AsyncIterator[RecordedMessage]: ...

    async def close(self) -> None: ...


class FileSource:
    """Recording files in the given order; progress in bytes of the files."""

    unit = "bytes"

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self.paths = [Path(p) for p in paths]
        self.total: int | None = sum(p.stat().st_size for p in self.paths if p.exists())
        self._done_bytes = 0
        self._current: RecordingReader | None = None

    def completed(self) -> int:
        current = self._current.position() if self._current is not None else 0
        return self._done_bytes + current

    async def messages(self) -> AsyncIterator[RecordedMessage]:
        for path in self.paths:
            with RecordingReader(path) as reader:
                self._current = reader
                messages = iter(reader)
                with expecting(path, FileKind.RECORDING):  # a file of another kind says so
                    first = next(messages, None)
                if first is not None:
                    yield first
                for n, msg in enumerate(messages, start=2):
                    yield msg
                    if n % YIELD_EVERY == 0:
                        await asyncio.sleep(0)
                self._current = None
                self._done_bytes += reader.size

    async def close(self) -> None:
        self._current = None


class TopicSource:
    """A slice of a topic, read directly (no recording file in between)."""

    unit = "messages"

    def __init__(self, reader: TopicReader) -> None:
        self.reader = reader
        self.total: int | None = reader.plan.total
        self._count = 0

    def completed(self) -> int:
        return self._count

    async def messages(self) -> AsyncIterator[RecordedMessage]:
        async for msg in self.reader.messages():
            self._count += 1
            yield msg

    async def close(self) -> None:
        await self.reader.stop()


# --- pacing --------------------------------------------------------------------------------


class Pacer:
    """Reproduces the recorded timing at `speed` times the original pace (None: no waiting).

    The schedule is anchored at the first message: message i is sent when
    (its timestamp - the first timestamp) / speed has passed, so delays never accumulate."""

    def __init__(
        self,
        speed: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.speed = speed
        self.clock = clock
        self.sleep = sleep
        self._origin: tuple[float, int] | None = None

    async def wait(self, timestamp_ms: int, halt: asyncio.Event | None = None) -> None:
        """Wait until the message is due; a set `halt` ends the wait early."""
        if not self.speed:
            return
        if self._origin is None:
            self._origin = (self.clock(), timestamp_ms)
            return
        start_wall, start_ts = self._origin
        due = start_wall + max(0, timestamp_ms - start_ts) / 1000.0 / self.speed
        delay = due - self.clock()
        if delay <= 0:
            return
        if halt is None:
            await self.sleep(delay)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(halt.wait(), delay)


# --- targets -------------------------------------------------------------------------------


class Target(Protocol):
    drops_control: bool

    async def start(self) -> None: ...

    async def send(self, msg: RecordedMessage) -> None: ...

    async def finish(self) -> None: ...


class TopicTarget:
    """Produces into a topic; keys decide partitions, so rewritten episodes move with them."""

    drops_control = False

    def __init__(self, writer: TopicWriter) -> None:
        self.writer = writer

    async def start(self) -> None:
        await self.writer.start()

    async def send(self, msg: RecordedMessage) -> None:
        await self.writer.send(msg)

    async def finish(self) -> None:
        try:
            await self.writer.flush()
        finally:
            await self.writer.stop()


class _CollectingSink:
    """Keeps dead letters as rejected input (the worker would have dead-lettered them)."""

    def __init__(self, inner: Sink | None) -> None:
        self.inner = inner
        self.rejected: list[RejectedInput] = []

    async def publish(self, stream: str, key: str, record: dict[str, JSON]) -> None:
        if stream == DLQ:
            where = f"{record['topic']}/{record['partition']}@{record['offset']}"
            self.rejected.append(RejectedInput(where, None, record["reason"], record["message"]))
        if self.inner is not None:
            await self.inner.publish(stream, key, record)


class PipelineTarget:
    """The evaluation pipeline in process, in event time: the results equal `check`'s."""

    drops_control = True

    def __init__(
        self,
        suites: list[Suite],
        *,
        rules: CloseRules | None = None,
        pricing: PricingTable | None = None,
        judge: Judge | None = None,
        metrics: PipelineMetrics | None = None,
        sink: Sink | None = None,
        on_result: Callable[[EpisodeResult], None] | None = None,
    ) -> None:
        self.results: list[EpisodeResult] = []
        self._on_result = on_result
        self.sink = _CollectingSink(sink)
        self.pipeline = Pipeline(
            suites,
            self.sink,
            rules=rules,
            pricing=pricing,
            judge=judge,
            metrics=metrics,
            on_result=self._collect,
            event_time=True,
            require_key=True,  # recorded Kafka messages: exactly the worker's rules
            llm_topics=frozenset(),
        )

    def _collect(self, result: EpisodeResult) -> None:
        self.results.append(result)
        if self._on_result is not None:
            self._on_result(result)

    async def start(self) -> None:
        return None

    async def send(self, msg: RecordedMessage) -> None:
        pipeline = self.pipeline
        if msg.topic.endswith(LLM_TOPIC_SUFFIX) and msg.topic not in pipeline.llm_topics:
            pipeline.llm_topics = pipeline.llm_topics | {msg.topic}
        env = Envelope(
            msg.topic,
            msg.value if msg.value is not None else b"",
            msg.key,
            msg.partition,
            msg.offset,
            msg.timestamp_ms,
        )
        await pipeline.handle(env)

    async def finish(self) -> None:
        await self.pipeline.drain()

    def report(self) -> CheckReport:
        """The results as `evalstream check` orders and annotates them."""
        results = sorted(
            self.results,
            key=lambda r: (r.started_ts if r.started_ts is not None else 0.0, r.episode_id),
        )
        knows = self.pipeline.suite_set.knows_case
        unknown = sorted({r.case_id for r in results if r.case_id and not knows(r.case_id)})
        for r in results:
            if r.case_id in unknown:
                r.notes.append(f"case_id {r.case_id!r} is not a case of any suite")
        return CheckReport(results, list(self.sink.rejected), unknown)


# --- the replay loop ----------------------------------------------------------------------


@dataclass
class ReplaySummary:
    sent: int = 0
    control_dropped: int = 0
    interrupted: bool = False


async def replay(
    source: Source,
    target: Target,
    *,
    rename: EpisodeRename | None = None,
    pacer: Pacer | None = None,
    halt: asyncio.Event | None = None,
    on_message: Callable[[], None] | None = None,
) -> ReplaySummary:
    """Send every message of `source` to `target`; `halt` stops after the message in hand."""
    rename = rename or EpisodeRename()
    pacer = pacer or Pacer(None)
    halt = halt or asyncio.Event()
    summary = ReplaySummary()
    await target.start()
    try:
        async for msg in source.messages():
            if target.drops_control and is_control(msg):
                summary.control_dropped += 1
                continue
            await pacer.wait(msg.timestamp_ms, halt)
            if halt.is_set():
                summary.interrupted = True
                break
            renamed = rename.apply(msg)
            await target.send(renamed)
            summary.sent += 1
            if on_message is not None:
                on_message()
            if halt.is_set():
                summary.interrupted = True
                break
    finally:
        await source.close()
        await target.finish()
    return summary
