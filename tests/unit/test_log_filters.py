"""The filter that keeps aiokafka's coordinator-discovery retries out of the ERROR log."""

from __future__ import annotations

import logging

import pytest
from aiokafka.errors import GroupAuthorizationFailedError, GroupCoordinatorNotAvailableError

from evalstream.stream.kafka_worker.log_filters import (
    COORDINATOR_DEAD,
    COORDINATOR_FAILED,
    COORDINATOR_LOGGER,
    CoordinatorDiscoveryFilter,
)


def record(error: Exception) -> logging.LogRecord:
    return logging.LogRecord(
        COORDINATOR_LOGGER, logging.ERROR, __file__, 1, COORDINATOR_FAILED, (error,), None
    )


def test_retries_during_discovery_are_debug_and_a_lasting_failure_stays_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    quiet = CoordinatorDiscoveryFilter(window_s=60.0, clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, COORDINATOR_LOGGER)
    early = record(GroupCoordinatorNotAvailableError())
    assert quiet.filter(early)
    assert early.levelno == logging.DEBUG
    dead = logging.LogRecord(
        COORDINATOR_LOGGER, logging.WARNING, __file__, 1, COORDINATOR_DEAD, (1, "g"), None
    )
    assert quiet.filter(dead)
    assert dead.levelno == logging.DEBUG
    now[0] += 61.0
    lasting = record(GroupCoordinatorNotAvailableError())
    assert quiet.filter(lasting)
    assert lasting.levelno == logging.ERROR


def test_a_retry_is_dropped_when_debug_is_off_and_other_errors_pass(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet = CoordinatorDiscoveryFilter(clock=lambda: 0.0)
    caplog.set_level(logging.INFO, COORDINATOR_LOGGER)
    assert not quiet.filter(record(GroupCoordinatorNotAvailableError()))
    fatal = record(GroupAuthorizationFailedError())  # not retriable: a real error
    assert quiet.filter(fatal)
    assert fatal.levelno == logging.ERROR
