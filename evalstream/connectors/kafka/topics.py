"""Creating evalstream's topics explicitly, with the configured partition count.

Auto-created topics get the broker's default partition count, which breaks co-partitioning of
signals and LLM calls by episode id; so topics are created up front, and an existing topic with
a different partition count is an error that says how to fix it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

from evalstream.assertions.errors import InputError

METADATA_WAIT_S = 15.0
# The broker stamps each record with the time it appended it; a producer's clock then cannot
# move the consumer's clock (see docs/operations.md, "Time on the Kafka path").
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


class TopicMismatchError(InputError):
    """An existing topic's partition count differs from the configured one."""


async def ensure_topics(
    bootstrap: str,
    topics: Iterable[str],
    partitions: int,
    replication_factor: int = 1,
    *,
    compacted: Iterable[str] = (),
    log_append_time: Iterable[str] = (),
) -> dict[str, int]:
    """Create missing topics; verify existing ones. Returns topic -> partition count.

    Topics in `compacted` are created with `cleanup.policy=compact`, topics in
    `log_append_time` with `message.timestamp.type=LogAppendTime` (an existing topic keeps
    its configuration: `topic_config` reads it)."""
    wanted = list(topics)
    compact = set(compacted)
    append_time = set(log_append_time)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in wanted if t not in existing]
        if missing:
            # Another worker may create them first: verified below.
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(
                    [
                        NewTopic(
                            name=t,
                            num_partitions=partitions,
                            replication_factor=replication_factor,
                            topic_configs={
                                **({"cleanup.policy": "compact"} if t in compact else {}),
                                **(LOG_APPEND_TIME if t in append_time else {}),
                            },
                        )
                        for t in missing
                    ]
                )
        counts = await _partition_counts(admin, wanted)
    finally:
        await admin.close()
    for topic in wanted:
        count = counts.get(topic, 0)
        if count != partitions:
            raise TopicMismatchError(
                f"topic {topic!r} has {count} partitions but {partitions} are configured; "
                "use the existing count (EVALSTREAM_PARTITIONS) or recreate the topic"
            )
    return counts


async def _partition_counts(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, int]:
    """Partition count per topic. Right after creation the metadata may not list a new
    topic's partitions yet (0): asked again for a bounded while before it counts."""
    deadline = time.monotonic() + METADATA_WAIT_S
    while True:
        described = await admin.describe_topics(topics)
        counts = {d["topic"]: len(d["partitions"]) for d in described}
        if all(counts.get(t, 0) > 0 for t in topics) or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(0.2)


async def topic_max_message_bytes(bootstrap: str, topic: str) -> int | None:
    """The broker's limit for one message of `topic` (its `max.message.bytes`, which
    defaults to the broker's `message.max.bytes`); None when the broker does not say."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    try:
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": None})]
        )
    finally:
        await admin.close()
    for response in responses:
        for resource in response.resources:
            for entry in resource[4]:  # (error, message, type, name, config entries)
                if entry[0] == "max.message.bytes" and entry[1] is not None:
                    return int(entry[1])
    return None


async def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's effective configuration (its own settings and the broker's defaults)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    try:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    config: dict[str, str] = {}
    for response in responses:
        for error_code, error_message, _type, _name, entries in response.resources:
            if error_code:
                raise InputError(
                    f"cannot read the configuration of topic {topic!r} "
                    f"(error {error_code}: {error_message})"
                )
            for entry in entries:
                name, value = entry[0], entry[1]
                if value is not None:
                    config[name] = value
    return config
