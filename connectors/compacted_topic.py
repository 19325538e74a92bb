"""Reading a compacted topic whole: the latest value per key (tombstones remove the key)."""

from __future__ import annotations

from connectors.kafka_io import TopicReader, TopicSlice


async def read_latest(bootstrap: str, topic: str) -> dict[bytes, bytes]:
    """Every key's latest value, read from the beginning to the end offsets of now."""
    reader = TopicReader(bootstrap, TopicSlice(topic))
    await reader.start()
    latest: dict[bytes, bytes] = {}
    try:
        async for message in reader.messages():
            if message.key is None:
                continue
            if message.value is None:
                latest.pop(message.key, None)
            else:
                latest[message.key] = message.value
    finally:
        await reader.stop()
    return latest
