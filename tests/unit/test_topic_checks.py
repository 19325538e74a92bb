"""The worker's start-up checks of its signals topic's configuration."""

from __future__ import annotations

import pytest

from evalstream.stream.kafka_worker.topic_checks import RetentionTooShortError, check_signals_topic

SIX_HOURS = 6 * 3_600_000.0
GOOD = {
    "retention.ms": str(7 * 86_400_000),
    "retention.bytes": "-1",
    "message.timestamp.type": "LogAppendTime",
}


def check(config: dict[str, str], max_duration_ms: float | None = SIX_HOURS) -> list[str]:
    return check_signals_topic(
        "evalstream.signals", config, max_duration_ms=max_duration_ms, broker="kafka:9092"
    )


def test_a_retention_longer_than_the_maximum_duration_passes_quietly() -> None:
    assert check(GOOD) == []
    assert check({**GOOD, "retention.ms": "-1"}) == []  # kept forever


@pytest.mark.parametrize("retention_ms", [SIX_HOURS, 3_600_000.0])
def test_a_retention_an_open_episode_can_outlive_is_refused_with_the_fix(
    retention_ms: float,
) -> None:
    with pytest.raises(RetentionTooShortError) as caught:
        check({**GOOD, "retention.ms": str(int(retention_ms))})
    message = str(caught.value)
    assert f"retention.ms={int(retention_ms)}" in message
    assert "max_duration_ms=21600000" in message
    assert "--entity-name evalstream.signals --add-config retention.ms=43200000" in message
    assert "EVALSTREAM_MAX_DURATION_MS" in message


def test_unbounded_episodes_or_size_based_retention_are_warned_about() -> None:
    [unbounded] = check(GOOD, max_duration_ms=None)
    assert "no maximum duration" in unbounded
    [by_size] = check({**GOOD, "retention.bytes": "1073741824"})
    assert "retention.bytes=1073741824" in by_size


def test_a_topic_keeping_producer_timestamps_is_warned_about_with_the_fix() -> None:
    [warning] = check({**GOOD, "message.timestamp.type": "CreateTime"})
    assert "--add-config message.timestamp.type=LogAppendTime" in warning
    assert "--bootstrap-server kafka:9092" in warning
