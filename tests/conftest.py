"""Fixtures shared by every tier: one real KRaft broker per test session, started lazily
(only when a test asks for `kafka_broker`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evalstream.stream.dev_kafka import KafkaBroker


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """A started single-node broker shared by the session; stopped when the session ends.

    It fails (rather than skips) without Java or Maven: CI runs every tier, and a skipped
    tier would hide a broken setup. The error message says what to install.
    """
    with KafkaBroker() as broker:
        yield broker
