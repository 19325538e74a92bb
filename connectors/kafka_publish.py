"""Publishing recorded signal files to the signals topic (the `up --kafka FILE…` path).

Each signal is published in its wire form, keyed by its episode id. A line that does not
decode is still published, as it was written and unkeyed: the worker dead-letters it with its
reason, as it would any bad input from a producer, so nothing in the file is silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson
from aiokafka import AIOKafkaProducer

from connectors.jsonl import Rejected, read_signals
from connectors.kafka_topics import ensure_topics

RAW_LINES_IN_FLIGHT = 2_000  # awaited in batches: bounded memory, still pipelined


async def publish_jsonl_files(
    bootstrap: str,
    topic: str,
    files: Sequence[Path],
    *,
    partitions: int,
    replication_factor: int = 1,
) -> int:
    """Publish every line of `files` to `topic`; returns how many records were acknowledged."""
    await ensure_topics(bootstrap, [topic], partitions, replication_factor)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    sent = 0
    try:
        pending = []
        for path in files:
            for item in read_signals(str(path)):
                if isinstance(item, Rejected):
                    pending.append(await producer.send(topic, item.raw, key=None))
                else:
                    value = orjson.dumps(item.to_wire())
                    key = item.episode_id.encode()
                    pending.append(await producer.send(topic, value, key=key))
                if len(pending) >= RAW_LINES_IN_FLIGHT:
                    for future in pending:
                        await future
                    sent += len(pending)
                    pending.clear()
        for future in pending:
            await future
        sent += len(pending)
    finally:
        await producer.stop()
    return sent
