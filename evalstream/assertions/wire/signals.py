"""The signal: the wire record everything else is built from (DESIGN §2).

Validation happens once, at decode time; the per-signal hot path then uses a plain slotted
object. Signal-native signals (`id, name, payload, timestamp, source`) decode unchanged when the
episode id comes from the envelope (the Kafka key or a file option).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from evalstream.assertions.errors import SignalDecodeError
from evalstream.assertions.wire.limits import (
    SUMMED_SIGNALS,
    check_attrs,
    check_payload_numbers,
    check_seq,
    check_text,
    check_timestamp,
)

JSON = Any  # a decoded JSON value; kept loose on purpose at the wire boundary


class Signal:
    """One decoded signal. `ts` is the event time in epoch milliseconds."""

    __slots__ = (
        "agent",
        "attrs",
        "episode_id",
        "id",
        "name",
        "parent",
        "payload",
        "provider",
        "seq",
        "timestamp",
        "ts",
    )

    def __init__(  # positional-or-keyword: the decoder calls it positionally (hot path)
        self,
        id: str,
        episode_id: str,
        name: str,
        ts: float,
        timestamp: str | float | int | None = None,
        seq: int | None = None,
        agent: str | None = None,
        parent: str | None = None,
        provider: str | None = None,
        payload: JSON = None,
        attrs: dict[str, JSON] | None = None,
    ) -> None:
        self.id = id
        self.episode_id = episode_id
        self.name = name
        self.ts = ts
        self.timestamp = timestamp if timestamp is not None else ts
        self.seq = seq
        self.agent = agent
        self.parent = parent
        self.provider = provider
        self.payload = payload
        self.attrs = attrs

    def payload_get(self, key: str) -> JSON:
        payload = self.payload
        return payload.get(key) if isinstance(payload, dict) else None

    def attributed_agent(self) -> str | None:
        """The agent a signal is about: `source.agent`, else `payload.agent`."""
        if self.agent is not None:
            return self.agent
        agent = self.payload_get("agent")
        return agent if isinstance(agent, str) else None

    def to_wire(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "id": self.id,
            "episode_id": self.episode_id,
            "name": self.name,
            "timestamp": self.timestamp,
        }
        if self.seq is not None:
            out["seq"] = self.seq
        source = {
            k: v
            for k, v in (
                ("agent", self.agent),
                ("provider", self.provider),
                ("parent", self.parent),
            )
            if v is not None
        }
        if source:
            out["source"] = source
        out["payload"] = self.payload
        if self.attrs:
            out["attrs"] = self.attrs
        return out

    def __repr__(self) -> str:
        return f"Signal({self.name!r}, id={self.id!r}, episode={self.episode_id!r})"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _rfc3339_ms(value: str) -> float:
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return ((parsed - _EPOCH) // _MICROSECOND) / 1000.0


def parse_timestamp(value: JSON) -> float:
    """RFC 3339 string or epoch milliseconds -> epoch milliseconds."""
    kind = type(value)
    if kind is str:
        return _rfc3339_ms(value)
    if kind is int or kind is float:
        return float(value)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(
            f"expected an RFC 3339 string or epoch milliseconds, got {type(value).__name__}"
        )
    return float(value)


def _content_id(obj: Mapping[str, JSON]) -> str:
    # A signal without an id gets one derived from its content, so a redelivered copy of the
    # same record gets the same id and is deduplicated (128 bits of BLAKE2b).
    digest = hashlib.blake2b(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS), digest_size=16)
    return "c-" + digest.hexdigest()


def signal_from_obj(obj: JSON, *, episode_id: str | None = None) -> Signal:
    """Validate a decoded JSON object as a signal. Raises SignalDecodeError with a reason."""
    if type(obj) is not dict:
        raise SignalDecodeError(
            "not_an_object", f"a signal must be a JSON object, got {type(obj).__name__}"
        )
    get = obj.get
    name = get("name")
    if type(name) is not str or not name:
        raise SignalDecodeError(
            "missing_name", "signal has no `name` (a non-empty string such as 'tool:call')"
        )
    check_text(name, "signal `name`")
    ep = get("episode_id")
    if ep is None:
        ep = episode_id
    if type(ep) is not str or not ep:
        raise SignalDecodeError(
            "missing_episode_id",
            "signal has no `episode_id`; set the field, or key the message by episode id",
        )
    check_text(ep, "signal `episode_id`")
    raw_ts = get("timestamp")
    if raw_ts is None:
        raise SignalDecodeError(
            "missing_timestamp",
            "signal has no `timestamp`; use an RFC 3339 string or epoch milliseconds",
        )
    try:
        ts = parse_timestamp(raw_ts)
    except ValueError as exc:
        raise SignalDecodeError("bad_timestamp", f"signal `timestamp` {raw_ts!r}: {exc}") from exc
    check_timestamp(ts, raw_ts)
    sid = get("id")
    if sid is None:
        sid = _content_id(obj)
    elif type(sid) is not str or not sid:
        raise SignalDecodeError("bad_id", f"signal `id` must be a non-empty string, got {sid!r}")
    else:
        check_text(sid, "signal `id`")
    seq = get("seq")
    if seq is not None:
        if type(seq) is not int:
            raise SignalDecodeError("bad_seq", f"signal `seq` must be an integer, got {seq!r}")
        check_seq(seq)
    source = get("source")
    agent, parent, provider = (None, None, None) if source is None else _source_fields(source)
    attrs = get("attrs")
    if attrs is not None:
        if type(attrs) is not dict:
            raise SignalDecodeError("bad_attrs", "signal `attrs` must be an object")
        check_attrs(attrs)
    payload = get("payload")
    if name in SUMMED_SIGNALS:
        check_payload_numbers(name, payload)
    return Signal(sid, ep, name, ts, raw_ts, seq, agent, parent, provider, payload, attrs or None)


def _source_fields(source: JSON) -> tuple[str | None, str | None, str | None]:
    if type(source) is not dict:
        raise SignalDecodeError(
            "bad_source", "signal `source` must be an object {agent?, provider?, parent?}"
        )
    agent = source.get("agent")
    parent = source.get("parent")
    provider = source.get("provider")
    if (
        (agent is not None and type(agent) is not str)
        or (parent is not None and type(parent) is not str)
        or (provider is not None and type(provider) is not str)
    ):
        raise SignalDecodeError(
            "bad_source", "signal `source.agent`, `.parent` and `.provider` must be strings"
        )
    _check_source(agent, parent, provider)
    return agent, parent, provider


def _check_source(agent: str | None, parent: str | None, provider: str | None) -> None:
    if agent is not None:
        check_text(agent, "signal `source.agent`")
    if parent is not None:
        check_text(parent, "signal `source.parent`")
    if provider is not None:
        check_text(provider, "signal `source.provider`")


def check_signal(sig: Signal) -> Signal:
    """The limits of `signal_from_obj` (evalstream/assertions/wire/limits.py), for a signal a codec
    built from a foreign record; returns it. Raises SignalDecodeError with the reason."""
    check_text(sig.name, "signal `name`")
    check_text(sig.episode_id, "signal `episode_id`")
    check_text(sig.id, "signal `id`")
    ts = sig.ts
    if type(ts) is not float and type(ts) is not int:
        raise SignalDecodeError("bad_timestamp", f"signal `timestamp` {ts!r} is not a number")
    check_timestamp(ts, sig.timestamp)
    if sig.seq is not None:
        check_seq(sig.seq)
    _check_source(sig.agent, sig.parent, sig.provider)
    if sig.attrs:
        check_attrs(sig.attrs)
    check_payload_numbers(sig.name, sig.payload)
    return sig


def decode_signal(raw: bytes | str, *, episode_id: str | None = None) -> Signal:
    """Decode one JSON document (a JSONL line or a Kafka message value)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SignalDecodeError("invalid_json", f"not valid JSON: {exc}") from exc
    return signal_from_obj(obj, episode_id=episode_id)
