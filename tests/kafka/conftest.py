"""Fixtures for the real-Kafka test tier: one KRaft broker per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stream.dev_kafka import KafkaBroker


def pytest_configure(config: pytest.Config) -> None:
    # Registered here so --strict-markers accepts it wherever this tier is collected.
    config.addinivalue_line(
        "markers", "kafka: needs a real Kafka broker (started by the kafka_broker fixture)"
    )


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """A started single-node broker shared by the session; stopped when the session ends.

    It fails (rather than skips) without Java or Maven: CI runs every tier, and a skipped
    tier would hide a broken setup. The error message says what to install.
    """
    with KafkaBroker() as broker:
        yield broker
