"""Output records with stable dedupe keys: verdicts, closed episodes, dead letters.

At-least-once delivery means a record may be published twice; its `dedupe_key` is the same
both times, and so is its content whenever the input was the same, so consumers can drop
repeats. A verdict's key names the rule version too, so two versions of a rule never collide.

An episode id may open again after its episode closed (an agent reusing ids, a signal after
the worker forgot the close): that is another episode, so the keys of an episode's records
name its instance too, by the id of the signal that opened it: `<episode_id>@<signal id>`.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from evalstream.assertions.evaluation.engine import AssertionOutcome
from evalstream.assertions.evaluation.results import EpisodeResult, iso_ms

JSON = Any


def episode_key(episode_id: str, instance: str | None) -> str:
    """The episode instance's part of a dedupe key (`instance`: its first signal's id)."""
    return episode_id if instance is None else f"{episode_id}@{instance}"


def verdict_record(
    episode_id: str,
    outcome: AssertionOutcome,
    attrs: dict[str, JSON],
    *,
    early: bool,
    instance: str | None = None,
) -> dict[str, JSON]:
    case_id = attrs.get("case_id")
    key = episode_id if instance is None else f"{episode_id}@{instance}"
    return {
        "dedupe_key": f"{key}/{outcome.suite}/{outcome.index}/{outcome.rule}",
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


def episode_record(result: EpisodeResult, instance: str | None = None) -> dict[str, JSON]:
    return {"dedupe_key": episode_key(result.episode_id, instance), **result.to_json()}


@dataclass(frozen=True)
class DeadLetter:
    """Input that could not be processed: original bytes, where, and why.

    A dead letter must itself fit the broker's message limit, or publishing it fails for
    ever: `to_json(max_bytes=...)` keeps the original bytes whole when they fit and otherwise
    keeps a prefix, with the full size and SHA-256 (`value_truncated` / `key_truncated`)."""

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

    def to_json(self, max_bytes: int | None = None) -> dict[str, JSON]:
        """The record; with `max_bytes`, its JSON encoding is at most that long."""
        record: dict[str, JSON] = {
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
        if max_bytes is None or len(orjson.dumps(record)) <= max_bytes:
            return record
        # Too large: the value (then the key, if that is not enough) shrinks to a prefix.
        for field, data in (("value", self.value), ("key", self.key)):
            if data is None:
                continue
            record[f"{field}_b64"] = ""
            record[f"{field}_truncated"] = True
            record[f"{field}_size"] = len(data)
            record[f"{field}_sha256"] = hashlib.sha256(data).hexdigest()
            room = max_bytes - len(orjson.dumps(record))
            if room >= 0:
                record[f"{field}_b64"] = _b64(data[: room // 4 * 3])
                return record
        # Still too large: the message goes too (a character takes at most 6 bytes in JSON).
        record["message"] = ""
        room = max(0, max_bytes - len(orjson.dumps(record)))
        record["message"] = self.message[: room // 6]
        return record


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")
