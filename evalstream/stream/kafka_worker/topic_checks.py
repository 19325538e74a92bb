"""What the worker checks of its signals topic at start-up.

- Retention: the worker commits, per partition, the first offset of the oldest episode still
  open, and a restarted worker rebuilds open episodes by reading from there. An episode may
  stay open up to `max_duration_ms`, so the topic must keep records longer than that, or a
  restart finds the start of an open episode deleted. A retention not above the maximum
  episode duration is refused, with the fix.
- Timestamps: the worker's clock for grace, inactivity and maximum duration is the broker's
  log-append time. On a topic that keeps the producers' timestamps (`CreateTime`) the worker
  falls back to the time it reads each record; that works, and a warning gives the fix.
"""

from __future__ import annotations

from collections.abc import Mapping

from evalstream.assertions.errors import InputError

CREATE_TIME = "CreateTime"


class RetentionTooShortError(InputError):
    """The signals topic deletes records an open episode may still need after a restart."""


def human_ms(ms: float) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms >= size:
            return f"{ms / size:g} {unit}"
    return f"{ms:g} ms"


def _kafka_configs(broker: str, topic: str, setting: str) -> str:
    return (
        f"kafka-configs.sh --bootstrap-server {broker} --alter --entity-type topics "
        f"--entity-name {topic} --add-config {setting}"
    )


def check_signals_topic(
    topic: str, config: Mapping[str, str], *, max_duration_ms: float | None, broker: str
) -> list[str]:
    """Warnings about the signals topic's configuration (`config`: its effective settings);
    raises `RetentionTooShortError` when its retention is not above the maximum duration."""
    warnings: list[str] = []
    retention_ms = float(config.get("retention.ms", "-1"))
    if retention_ms >= 0:
        if max_duration_ms is None:
            warnings.append(
                f"episodes have no maximum duration, but topic {topic!r} deletes records after "
                f"{human_ms(retention_ms)}: a worker restarted while an episode is open longer "
                "than that cannot rebuild it. Set max_duration_ms (EVALSTREAM_MAX_DURATION_MS) "
                "below the retention."
            )
        elif retention_ms <= max_duration_ms:
            suggested = int(2 * max_duration_ms)
            raise RetentionTooShortError(
                f"topic {topic!r} keeps records for {human_ms(retention_ms)} "
                f"(retention.ms={int(retention_ms)}), but an episode may stay open for "
                f"{human_ms(max_duration_ms)} (max_duration_ms={int(max_duration_ms)}). A "
                "restarted worker resumes at the first signal of its oldest open episode, "
                "which must still be in the topic. Raise the retention above the maximum "
                "duration plus the longest outage to survive, e.g. "
                f"`{_kafka_configs(broker, topic, f'retention.ms={suggested}')}`, "
                "or lower max_duration_ms (EVALSTREAM_MAX_DURATION_MS) below "
                f"{int(retention_ms)}."
            )
    retention_bytes = int(config.get("retention.bytes", "-1"))
    if retention_bytes >= 0:
        warnings.append(
            f"topic {topic!r} also deletes by size (retention.bytes={retention_bytes} per "
            "partition): a busy partition may lose records younger than the maximum episode "
            "duration; make sure a partition holds that long a stretch of traffic."
        )
    if config.get("message.timestamp.type") == CREATE_TIME:
        warnings.append(
            f"topic {topic!r} keeps the producers' timestamps (message.timestamp.type="
            "CreateTime): a producer's clock must not close episodes, so the worker times "
            "them by when it reads each record instead of when the broker appended it (late "
            "by the worker's lag). Let the broker stamp them: "
            f"`{_kafka_configs(broker, topic, 'message.timestamp.type=LogAppendTime')}`."
        )
    return warnings
