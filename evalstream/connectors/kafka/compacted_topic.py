"""Reading a compacted topic whole: the latest value per key (tombstones remove the key)."""

from __future__ import annotations

from collections.abc import Sequence

from evalstream.connectors.kafka.topic_io import TopicReader, TopicSlice


async def read_latest(bootstrap: str, topic: str) -> dict[bytes, bytes]:
    """Every key's latest value, read from the beginning to the end offsets of now."""
    latest: dict[bytes, bytes] = {}
    for values in (await read_latest_by_partition(bootstrap, topic)).values():
        latest.update(values)
    return latest


async def read_latest_by_partition(
    bootstrap: str, topic: str, partitions: Sequence[int] | None = None
) -> dict[int, dict[bytes, bytes]]:
    """Per partition (all, or those given), every key's latest value up to now's end."""
    reader = TopicReader(bootstrap, TopicSlice(topic, partitions=partitions))
    await reader.start()
    latest: dict[int, dict[bytes, bytes]] = {p: {} for p in reader.plan.start}
    try:
        async for message in reader.messages():
            if message.key is None:
                continue
            values = latest.setdefault(message.partition, {})
            if message.value is None:
                values.pop(message.key, None)
            else:
                values[message.key] = message.value
    finally:
        await reader.stop()
    return latest
