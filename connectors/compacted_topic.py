"""Reading a compacted topic whole: the latest value per key (tombstones remove the key)."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition


async def read_latest(bootstrap: str, topic: str) -> dict[bytes, bytes]:
    """Every key's latest value, read from the beginning to the end offsets of now."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False
    )
    await consumer.start()
    latest: dict[bytes, bytes] = {}
    try:
        partitions = consumer.partitions_for_topic(topic)
        if partitions is None:
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        if not tps:
            return latest
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        remaining = {tp for tp in tps if ends[tp] > 0}
        while remaining:
            batch = await consumer.getmany(*remaining, timeout_ms=1000)
            for messages in batch.values():
                for message in messages:
                    if message.key is None:
                        continue
                    if message.value is None:
                        latest.pop(message.key, None)
                    else:
                        latest[message.key] = message.value
            for tp in list(remaining):
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
    finally:
        await consumer.stop()
    return latest
