"""The records the Kafka worker's pipeline publishes for a file of signals, as `--out`
writes them: to compare the embedded runtime's JSONL output with."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from evalstream.assertions.suite_format.suites import Suite
from evalstream.stream.pipeline import EPISODES, VERDICTS, Envelope, MemorySink, Pipeline

JSON = Any


def worker_records(recording: Path, suites: list[Suite]) -> list[dict[str, JSON]]:
    """The verdicts and episodes the worker's pipeline (messages keyed by episode id, as on
    the signals topic) publishes for the recording's signals; each with its `stream`."""
    sink = MemorySink()
    pipeline = Pipeline(suites, sink, require_key=True)

    async def feed() -> None:
        lines = [line for line in recording.read_bytes().splitlines() if line.strip()]
        for offset, line in enumerate(lines):
            key = orjson.loads(line)["episode_id"].encode()
            await pipeline.handle(Envelope("evalstream.signals", line, key, 0, offset))
        await pipeline.drain()

    asyncio.run(feed())
    return [
        {"stream": stream, **record}
        for stream in (VERDICTS, EPISODES)
        for _, record in sink.records[stream]
    ]


def by_dedupe_key(records: list[dict[str, JSON]]) -> dict[str, dict[str, JSON]]:
    """Records by their dedupe key (their order differs between transports); a key seen
    twice fails."""
    keyed = {r["dedupe_key"]: r for r in records}
    assert len(keyed) == len(records), "a record was written twice"
    return keyed
