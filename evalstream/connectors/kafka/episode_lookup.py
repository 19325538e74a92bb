"""Finding one episode's records on Kafka without reading whole topics.

Every evalstream topic is keyed by episode id, so the key decides the partition (murmur2,
evalstream/connectors/kafka/partitions.py): only that partition of each topic is read, and only the
offsets of a time window, found with the broker's time index (`offsets_for_times`). No
consumer group: nothing is committed and live consumers are not disturbed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from evalstream.assertions.errors import InputError, SignalDecodeError
from evalstream.assertions.evaluation.results import iso_ms
from evalstream.assertions.reports.episode_timeline import EpisodeEvidence
from evalstream.assertions.wire.signals import Signal, signal_from_obj
from evalstream.connectors.files.episode_evidence import (
    CONTROL_SIGNAL,
    OTHER_IDS_SHOWN,
    note_other_id,
)
from evalstream.connectors.kafka.partitions import key_partition_lookup

JSON = Any
FETCH_TIMEOUT_MS = 500
MAX_RECORDS_PER_FETCH = 1000
# Which evidence each topic holds; `episodes` must exist, the others are read when present.
EVIDENCE_TOPICS = ("episodes", "verdicts", "alerts", "signals")


class BrokerUnreachableError(InputError):
    """The broker did not answer."""


@dataclass
class PartitionScan:
    """What was read of one topic: its partition for the key, the window's offsets, counts."""

    topic: str
    partition: int | None  # None: the topic does not exist
    start: int = 0
    end: int = 0
    matched: int = 0

    @property
    def read(self) -> int:
        return max(0, self.end - self.start)

    def describe(self) -> str:
        if self.partition is None:
            return f"{self.topic} (no such topic)"
        return (
            f"{self.topic} partition {self.partition} offsets {self.start}..{self.end} "
            f"({self.read} records)"
        )


@dataclass
class KafkaLookup:
    evidence: EpisodeEvidence
    scans: list[PartitionScan]

    @property
    def window_empty(self) -> bool:
        return all(s.read == 0 for s in self.scans)


def window_text(since_ms: int, until_ms: int | None) -> str:
    return f"{iso_ms(since_ms)} .. {iso_ms(until_ms) if until_ms is not None else 'now'}"


async def lookup_episode(
    bootstrap: str,
    topics: Mapping[str, str],
    episode_id: str,
    since_ms: int,
    until_ms: int | None = None,
    *,
    connect_timeout_s: float = 10.0,
) -> KafkaLookup:
    """The records keyed `episode_id` in [since_ms, until_ms) of each topic in `topics`
    (evidence kind -> topic name: `episodes`, `verdicts`, `alerts`, `signals`)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        request_timeout_ms=int(connect_timeout_s * 1000),
    )
    try:
        await consumer.start()
    except KafkaError as exc:
        await consumer.stop()
        raise BrokerUnreachableError(
            f"cannot reach Kafka at {bootstrap}: {exc}; pass the right bootstrap servers "
            "with --broker (or EVALSTREAM_BROKER)"
        ) from exc
    try:
        return await _lookup(consumer, topics, episode_id, since_ms, until_ms)
    except KafkaError as exc:
        raise BrokerUnreachableError(
            f"Kafka at {bootstrap} failed while reading: {exc}; check the broker and retry"
        ) from exc
    finally:
        await consumer.stop()


async def _lookup(
    consumer: Any,
    topics: Mapping[str, str],
    episode_id: str,
    since_ms: int,
    until_ms: int | None,
) -> KafkaLookup:
    key = episode_id.encode()
    # The consumer's public calls only know subscribed topics; ask for all metadata.
    cluster = await consumer._client.fetch_all_metadata()
    scans: dict[str, PartitionScan] = {}
    for kind, topic in topics.items():
        partitions = cluster.partitions_for_topic(topic)
        if not partitions:
            scans[kind] = PartitionScan(topic, None)
            continue
        scans[kind] = PartitionScan(topic, key_partition_lookup(partitions)(key))
    if scans.get("episodes") is None or scans["episodes"].partition is None:
        raise InputError(
            f"topic {topics.get('episodes')!r} does not exist on the broker; pass the "
            "deployment's --topic-prefix (or EVALSTREAM_TOPIC_PREFIX) or --config"
        )
    live = {k: s for k, s in scans.items() if s.partition is not None}
    tps = {k: TopicPartition(s.topic, s.partition) for k, s in live.items()}
    consumer.assign(list(tps.values()))
    first = await consumer.beginning_offsets(list(tps.values()))
    last = await consumer.end_offsets(list(tps.values()))
    at_since = await consumer.offsets_for_times(dict.fromkeys(tps.values(), since_ms))
    at_until = (
        await consumer.offsets_for_times(dict.fromkeys(tps.values(), until_ms))
        if until_ms is not None
        else {}
    )
    for kind, tp in tps.items():
        found = at_since.get(tp)
        start = max(first[tp], found.offset if found is not None else last[tp])
        bound = at_until.get(tp)
        end = bound.offset if bound is not None else last[tp]
        live[kind].start, live[kind].end = start, max(start, end)
        consumer.seek(tp, start)
    evidence = EpisodeEvidence(episode_id, "")
    if "signals" in live:
        evidence.signals = []
    by_tp = {tp: kind for kind, tp in tps.items()}
    active = {tp for kind, tp in tps.items() if live[kind].read > 0}
    while active:
        batch = await consumer.getmany(
            *active, timeout_ms=FETCH_TIMEOUT_MS, max_records=MAX_RECORDS_PER_FETCH
        )
        for tp, records in batch.items():
            kind = by_tp[tp]
            scan = live[kind]
            for record in records:
                if record.offset >= scan.end:
                    active.discard(tp)
                    break
                if record.key != key:
                    if record.key is not None and len(evidence.other_ids) < OTHER_IDS_SHOWN:
                        note_other_id(evidence, record.key.decode("utf-8", "replace"))
                    continue
                if record.value is not None and _collect(evidence, kind, record.value, episode_id):
                    scan.matched += 1
        for tp in list(active):
            if await consumer.position(tp) >= live[by_tp[tp]].end:
                active.discard(tp)
    return KafkaLookup(evidence, list(scans.values()))


def _collect(evidence: EpisodeEvidence, kind: str, value: bytes, episode_id: str) -> bool:
    """Adds one record of the key to the evidence; False for one that does not decode."""
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(obj, dict):
        return False
    if kind == "signals":
        if obj.get("name") == CONTROL_SIGNAL:
            return False
        try:
            signal: Signal = signal_from_obj(obj, episode_id=episode_id)
        except SignalDecodeError:
            return False  # the worker dead-lettered it
        assert evidence.signals is not None
        evidence.signals.append(signal)
        return True
    getattr(evidence, kind).append(obj)
    return True
