"""Output records with stable dedupe keys: verdicts, closed episodes, dead letters.

At-least-once delivery means a record may be published twice; its `dedupe_key` is the same
both times, and so is its content whenever the input was the same, so consumers can drop
repeats. A verdict's key names the rule version too, so two versions of a rule never collide.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from assertions.engine import AssertionOutcome
from assertions.results import EpisodeResult, iso_ms

JSON = Any


def verdict_record(
    episode_id: str,
    outcome: AssertionOutcome,
    attrs: dict[str, JSON],
    *,
    early: bool,
) -> dict[str, JSON]:
    case_id = attrs.get("case_id")
    return {
        "dedupe_key": f"{episode_id}/{outcome.suite}/{outcome.index}/{outcome.rule}",
        "episode_id": episode_id,
        "case_id": case_id if isinstance(case_id, str) else None,
        "agent_id": attrs.get("agent_id"),
        "variant": attrs.get("variant"),
        "early": early,
        "decided_at_time": iso_ms(outcome.decided_ts),
        # outcome.to_json(), spelled out (one dict per verdict, not two); same keys, same order
        "index": outcome.index,
        "type": outcome.type,
        "suite": outcome.suite,
        "rule": outcome.rule,
        "verdict": outcome.verdict._value_,
        "message": outcome.message,
        "decided_at": outcome.decided_at,
    }


def episode_record(result: EpisodeResult) -> dict[str, JSON]:
    return {"dedupe_key": result.episode_id, **result.to_json()}


@dataclass(frozen=True)
class DeadLetter:
    """Input that could not be processed, kept whole: original bytes, where, and why."""

    reason: str
    message: str
    topic: str | None
    partition: int | None
    offset: int | None
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None

    @property
    def dedupe_key(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    def to_json(self) -> dict[str, JSON]:
        return {
            "dedupe_key": self.dedupe_key,
            "reason": self.reason,
            "message": self.message,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "timestamp_ms": self.timestamp_ms,
            "key_b64": _b64(self.key),
            "value_b64": _b64(self.value),
        }


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")
