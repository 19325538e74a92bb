"""Decoded request items -> records to publish, one function per input shape.

All-or-nothing: a request with one invalid item is refused whole (422, with the index and
reason of each bad item), so a client never has to work out which half was published.
Every record is tenant-stamped (`tenancy.Caller`) and redacted before it is encoded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

from evalstream.assertions.errors import SignalDecodeError
from evalstream.assertions.wire.signals import Signal, check_signal, signal_from_obj
from evalstream.connectors.codecs.litellm import litellm_call_record
from evalstream.connectors.codecs.llm_calls import llm_call_signals
from evalstream.connectors.gateway.errors import Rejected
from evalstream.connectors.gateway.publisher import LLM_CALLS, SIGNALS, OutRecord
from evalstream.connectors.gateway.redaction import Redactor
from evalstream.connectors.gateway.tenancy import Caller

JSON = Any
MAX_DETAILS = 20


class Encoder:
    """Serialises records, redacting those the pre-filter flags."""

    def __init__(self, redactor: Redactor | None) -> None:
        self.redactor = redactor

    def encode_all(self, records: list[dict[str, JSON]]) -> list[bytes]:
        """Like `encode` per record, with the pre-filter run once over the whole batch."""
        redactor = self.redactor
        try:
            data = [orjson.dumps(record) for record in records]
        except TypeError as exc:
            raise Rejected(
                422, "unencodable", f"a record cannot be encoded as JSON: {exc}"
            ) from exc
        if redactor is None or not redactor.needs_walk(b"\n".join(data)):
            return data
        return [self.encode(record) for record in records]

    def encode(self, record: dict[str, JSON]) -> bytes:
        try:
            data = orjson.dumps(record)
            if self.redactor is not None and self.redactor.needs_walk(data):
                data = orjson.dumps(self.redactor.redact(record))
        except TypeError as exc:  # e.g. an integer beyond 64 bits made by a codec
            raise Rejected(
                422, "unencodable", f"a record cannot be encoded as JSON: {exc}"
            ) from exc
        return data


class _Problems:
    def __init__(self, what: str) -> None:
        self.what = what
        self.details: list[dict[str, JSON]] = []
        self.count = 0

    def add(self, index: int, exc: SignalDecodeError) -> None:
        self.count += 1
        if len(self.details) < MAX_DETAILS:
            self.details.append({"index": index, "reason": exc.reason, "message": exc.message})

    def raise_if_any(self, total: int) -> None:
        if self.count:
            raise Rejected(
                422,
                f"invalid_{self.what}",
                f"{self.count} of {total} {self.what}s are invalid; nothing was published",
                details=self.details,
            )


def signal_records(
    items: list[JSON], caller: Caller, encoder: Encoder, episode_id: str | None
) -> list[OutRecord]:
    """Native / signal-native signals; `episode_id` fills in for signals that name none."""
    problems = _Problems("signal")
    keys: list[str] = []
    records: list[dict[str, JSON]] = []
    for index, obj in enumerate(items):
        try:
            sig = signal_from_obj(obj, episode_id=episode_id)
            record = dict(obj)
            record["id"] = sig.id  # a content-derived id is fixed here, before stamping
            keys.append(caller.stamp(record, sig.episode_id))
        except SignalDecodeError as exc:
            problems.add(index, exc)
            continue
        records.append(record)
    problems.raise_if_any(len(items))
    values = encoder.encode_all(records)
    return [OutRecord(SIGNALS, key, value) for key, value in zip(keys, values, strict=True)]


def llm_call_records(
    items: Iterable[JSON], caller: Caller, encoder: Encoder, episode_id: str | None
) -> list[OutRecord]:
    """Native or AIR LLM-call records, published as they are to the llm-calls stream (the
    worker joins them into their episode)."""
    problems = _Problems("llm_call")
    out: list[OutRecord] = []
    total = 0
    for index, obj in enumerate(items):
        total += 1
        try:
            if not isinstance(obj, dict):
                raise SignalDecodeError("not_an_object", "an LLM-call record must be an object")
            record = dict(obj)
            if not record.get("episode_id") and episode_id:
                record["episode_id"] = episode_id
            signals = llm_call_signals(record)  # validates; the worker decodes it again
            key = caller.stamp(record, signals[0].episode_id)
        except SignalDecodeError as exc:
            problems.add(index, exc)
            continue
        out.append(OutRecord(LLM_CALLS, key, encoder.encode(record)))
    problems.raise_if_any(total)
    return out


def converted_records(
    items: list[JSON],
    convert: Callable[[JSON], list[Signal]],
    caller: Caller,
    encoder: Encoder,
    what: str,
) -> list[OutRecord]:
    """Items of a foreign shape, each turned into signals by `convert`."""
    problems = _Problems(what)
    signals: list[Signal] = []
    for index, obj in enumerate(items):
        try:
            signals.extend(check_signal(sig) for sig in convert(obj))
        except SignalDecodeError as exc:
            problems.add(index, exc)
    problems.raise_if_any(len(items))
    return wire_records(signals, caller, encoder)


def wire_records(signals: Iterable[Signal], caller: Caller, encoder: Encoder) -> list[OutRecord]:
    keys: list[str] = []
    records: list[dict[str, JSON]] = []
    for sig in signals:
        record = sig.to_wire()
        try:
            keys.append(caller.stamp(record, sig.episode_id))
        except SignalDecodeError as exc:
            raise Rejected(422, "invalid_signal", exc.message) from exc
        records.append(record)
    values = encoder.encode_all(records)
    return [OutRecord(SIGNALS, key, value) for key, value in zip(keys, values, strict=True)]


def episode_ids(records: Iterable[OutRecord], limit: int = 100) -> list[str]:
    """The distinct (scoped) episode ids of a request, in first-seen order."""
    seen: dict[str, None] = {}
    for record in records:
        if record.key not in seen:
            seen[record.key] = None
            if len(seen) >= limit:
                break
    return list(seen)


def litellm_records(
    items: list[JSON], caller: Caller, encoder: Encoder, episode_id: str | None
) -> list[OutRecord]:
    """LiteLLM standard logging payloads, as native LLM-call records."""
    problems = _Problems("litellm_payload")
    calls: list[JSON] = []
    for index, obj in enumerate(items):
        try:
            calls.append(litellm_call_record(obj, episode_id=episode_id))
        except SignalDecodeError as exc:
            problems.add(index, exc)
    problems.raise_if_any(len(items))
    return llm_call_records(calls, caller, encoder, None)
