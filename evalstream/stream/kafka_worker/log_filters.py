"""Log filters that keep the worker's start-up log truthful.

aiokafka logs `Group Coordinator Request failed: [Error 15] GroupCoordinatorNotAvailableError`
at ERROR while a consumer group's coordinator is still being discovered: at every start
(the broker elects it, or loads the offsets topic, on the first request) and after a
rebalance, followed by WARNINGs `Marking the coordinator dead` when a join meets a coordinator
not yet ready. The lookup is retried and succeeds; these only alarm. For a while after the
first one, retriable lookup failures and coordinator-dead notices are logged at DEBUG; still
happening after that window they are a real problem and keep their level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"
COORDINATOR_FAILED = "Group Coordinator Request failed: %s"
COORDINATOR_DEAD = "Marking the coordinator dead (node %s)for group %s."
DISCOVERY_WINDOW_S = 60.0


class CoordinatorDiscoveryFilter(logging.Filter):
    """Downgrades retriable coordinator-lookup failures and coordinator-dead notices to DEBUG
    for `window_s` seconds after the first one; other records pass unchanged."""

    def __init__(
        self,
        window_s: float = DISCOVERY_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.window_s = window_s
        self.clock = clock
        self._first: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == COORDINATOR_FAILED:
            error = record.args[0] if isinstance(record.args, tuple) and record.args else None
            if not getattr(error, "retriable", False):
                return True
        elif record.msg != COORDINATOR_DEAD:
            return True
        now = self.clock()
        if self._first is None:
            self._first = now
        if now - self._first > self.window_s:
            return True  # still failing: worth its level
        if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
            return False
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


def quiet_coordinator_discovery() -> CoordinatorDiscoveryFilter:
    """Installs the filter on aiokafka's group-coordinator logger (once) and returns it."""
    logger = logging.getLogger(COORDINATOR_LOGGER)
    for existing in logger.filters:
        if isinstance(existing, CoordinatorDiscoveryFilter):
            return existing
    installed = CoordinatorDiscoveryFilter()
    logger.addFilter(installed)
    return installed
