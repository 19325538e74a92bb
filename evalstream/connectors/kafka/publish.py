"""Publishing recorded signal files to the signals topic (the `up --kafka FILE…` path).

Each signal is published in its wire form, keyed by its episode id. A line that does not
decode is still published, as it was written and unkeyed: the worker dead-letters it with its
reason, as it would any bad input from a producer, so nothing in the file is silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson

from evalstream.connectors.codecs.jsonl import Rejected, read_signals
from evalstream.connectors.files.recording import RecordedMessage
from evalstream.connectors.kafka.topic_io import TopicWriter
from evalstream.connectors.kafka.topics import ensure_topics

ANY_PARTITION = -1  # no recorded partition: the key decides


async def publish_jsonl_files(
    bootstrap: str,
    topic: str,
    files: Sequence[Path],
    *,
    partitions: int,
    replication_factor: int = 1,
) -> int:
    """Publish every line of `files` to `topic`; returns how many records were acknowledged."""
    await ensure_topics(bootstrap, [topic], partitions, replication_factor, log_append_time=[topic])
    writer = TopicWriter(bootstrap, topic, keep_timestamps=False)
    await writer.start()
    try:
        for path in files:
            for item in read_signals(str(path)):
                if isinstance(item, Rejected):
                    key, value = None, item.raw
                else:
                    key, value = item.episode_id.encode(), orjson.dumps(item.to_wire())
                await writer.send(RecordedMessage(topic, ANY_PARTITION, -1, 0, key, value))
        await writer.flush()
    finally:
        await writer.stop()
    return writer.sent
