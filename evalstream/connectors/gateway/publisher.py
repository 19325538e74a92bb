"""Where the gateway puts what it accepted: the `Publisher` protocol and an in-memory one.

A publisher returns only once the records are secured (the broker acknowledged them, or the
in-process pipeline queued them) and raises `Unavailable` otherwise; the gateway answers 2xx
only after a successful `publish`. Implementations: `KafkaPublisher` (aiokafka, acks=all,
idempotent), `evalstream.stream.embedded.PipelineFeed` (the embedded runtime's queue) and
`MemoryPublisher` (tests and fuzzing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from evalstream.connectors.gateway.errors import Unavailable

SIGNALS, LLM_CALLS = "signals", "llm-calls"


@dataclass(frozen=True, slots=True)
class OutRecord:
    """One message: `stream` is `signals` or `llm-calls`; `key` the (scoped) episode id."""

    stream: str
    key: str
    value: bytes


class Publisher(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def publish(self, records: Sequence[OutRecord]) -> None:
        """Return once every record is secured; raise `Unavailable` otherwise."""
        ...

    async def ready(self) -> bool: ...


class MemoryPublisher:
    """Keeps records in a list; `fail_with` makes every publish raise (to test 503s)."""

    def __init__(self) -> None:
        self.records: list[OutRecord] = []
        self.fail_with: Unavailable | None = None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def publish(self, records: Sequence[OutRecord]) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.records.extend(records)

    async def ready(self) -> bool:
        return self.fail_with is None
