"""Kafka's default partition for a record key, cached per (topic, key).

The same choice `AIOKafkaProducer.send` makes (murmur2 of the key), for callers that build
record batches themselves. An episode's records all share its id as key, so the hash is
computed once per episode, not per record.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from aiokafka.partitioner import DefaultPartitioner

CACHE_LIMIT = 100_000  # keys remembered; the cache is cleared whole when full


class KeyPartitions:
    def __init__(self) -> None:
        self._partitioner = DefaultPartitioner()
        self._chosen: dict[tuple[str, bytes], int] = {}

    def get(self, topic: str, key: bytes) -> int | None:
        """The partition already chosen for this key, if any."""
        return self._chosen.get((topic, key))

    def choose(self, topic: str, key: bytes, partitions: Collection[int]) -> int:
        """The default partitioner's choice among `partitions` (all of the topic's)."""
        chosen = self._chosen.get((topic, key))
        if chosen is None:
            ordered = sorted(partitions)
            chosen = int(self._partitioner(key, ordered, ordered))
            if len(self._chosen) >= CACHE_LIMIT:
                self._chosen.clear()
            self._chosen[(topic, key)] = chosen
        return chosen


def key_partition_lookup(partitions: Collection[int]) -> Callable[[bytes], int]:
    """`key -> partition` for one topic (all its `partitions`), cached per key: a consumer
    that checks every record's partition asks once per record."""
    ordered = sorted(partitions)
    partitioner = DefaultPartitioner()
    chosen: dict[bytes, int] = {}
    get = chosen.get

    def partition_of(key: bytes) -> int:
        found = get(key)
        if found is None:
            if len(chosen) >= CACHE_LIMIT:
                chosen.clear()
            found = chosen[key] = int(partitioner(key, ordered, ordered))
        return found

    return partition_of
