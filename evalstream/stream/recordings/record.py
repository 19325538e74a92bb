"""`evalstream record`: copy a topic (or a slice of it) into a recording file.

Messages stream from the broker to the file one by one (bounded memory whatever the topic's
size), with a progress bar on a terminal. Ctrl-C (SIGINT) or SIGTERM stops after the message
in hand and closes the file properly: what was written is a complete, valid recording.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from evalstream.assertions.errors import InputError
from evalstream.assertions.wire.signals import parse_timestamp
from evalstream.connectors.files.recording import RecordingWriter
from evalstream.connectors.kafka.topic_io import Plan, TopicReader, TopicSlice

FLUSH_EVERY_S = 0.5
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_time(text: str, now_ms: Callable[[], float] = lambda: time.time() * 1000.0) -> int:
    """A point in time for `--from-time` / `--to-time`: RFC 3339, epoch milliseconds, `now`,
    or a duration ago such as `90m`, `2h`, `7d`, `1h30m`."""
    value = text.strip()
    if value == "now":
        return int(now_ms())
    if value.isdigit():
        return int(value)
    match = _DURATION.match(value)
    if match and any(match.groups()):
        d, h, m, s = (int(g or 0) for g in match.groups())
        return int(now_ms() - ((d * 24 + h) * 3600 + m * 60 + s) * 1000)
    try:
        return int(parse_timestamp(value))
    except ValueError as exc:
        raise InputError(
            f"time {text!r} is not understood; use RFC 3339 (2025-01-31T12:00:00Z), "
            "epoch milliseconds, `now`, or a duration ago such as 90m, 2h or 7d"
        ) from exc


def parse_offsets(specs: tuple[str, ...]) -> dict[int, int]:
    """`--offset 120` (every partition) and `--offset 3:120` (partition 3) -> {partition: offset},
    where -1 stands for every partition not named."""
    out: dict[int, int] = {}
    for spec in specs:
        part, _, offset = spec.rpartition(":")
        try:
            partition = int(part) if part else -1
            value = int(offset)
        except ValueError as exc:
            raise InputError(
                f"offset {spec!r} is not understood; use OFFSET or PARTITION:OFFSET, "
                "e.g. --offset 120 or --offset 3:120"
            ) from exc
        if value < 0 or partition < -1:
            raise InputError(f"offset {spec!r}: partitions and offsets are >= 0")
        out[partition] = value
    return out


@dataclass
class RecordSummary:
    path: Path
    written: int
    planned: int | None
    interrupted: bool


@contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set `stop` instead of killing the loop mid-write."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # not the main thread: no handlers
            pass
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def progress_bar(console: Console, total: int | None, what: str) -> Progress:
    columns: list[Any] = [SpinnerColumn(), TextColumn(what)]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    else:
        columns += [TextColumn("{task.completed} messages")]
    columns.append(TimeElapsedColumn())
    return Progress(*columns, console=console, transient=False, disable=not console.is_terminal)


async def record_topic(
    bootstrap: str,
    slice_: TopicSlice,
    path: str | Path,
    *,
    compress: bool | None = None,
    console: Console | None = None,
) -> RecordSummary:
    """Copy the slice into `path`; returns how many messages were written."""
    console = console or Console(stderr=True)
    reader = TopicReader(bootstrap, slice_)
    with stop_on_signals(reader.halt):
        plan: Plan = await reader.start()
        source = {
            "topic": slice_.topic,
            "bootstrap": bootstrap,
            "start": {str(p): o for p, o in plan.start.items()},
            "end": {str(p): o for p, o in plan.end.items()},
            "recorded_at": int(time.time() * 1000),
        }
        try:
            with (
                RecordingWriter(path, source, compress=compress) as writer,
                progress_bar(console, plan.total, f"recording {slice_.topic}") as progress,
            ):
                task = progress.add_task("record", total=plan.total)

                async def flush_now_and_then() -> None:
                    # A followed topic may go quiet: push complete lines out regardless.
                    while True:
                        await asyncio.sleep(FLUSH_EVERY_S)
                        writer.flush()
                        progress.update(task, completed=writer.count)

                flusher = asyncio.create_task(flush_now_and_then())
                try:
                    async for msg in reader.messages():
                        writer.write(msg)
                finally:
                    flusher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await flusher
                progress.update(task, completed=writer.count)
                written = writer.count
        finally:
            await reader.stop()
    return RecordSummary(Path(path), written, plan.total, reader.halt.is_set())
