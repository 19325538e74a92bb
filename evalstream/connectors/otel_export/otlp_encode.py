"""Evaluation events as OTLP protobuf request bodies, written directly in the wire format.

Building the generated message classes cost ~35-75 µs per event (a dozen attribute messages
each); writing the few fields these requests use straight into bytes costs a fraction of
that, and the bytes decode with opentelemetry-proto like any exporter's (the tests decode
them). Field numbers are those of opentelemetry-proto's `logs/v1`, `trace/v1`,
`common/v1`, `resource/v1` and `collector/*/v1` messages.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from functools import lru_cache

from evalstream.connectors.otel_export.evaluation_events import EVENT_NAME, NAME, EvaluationEvent

AttrValue = str | int | float | bool
SEVERITY_INFO, SEVERITY_WARN = 9, 13
SPAN_KIND_INTERNAL = 1
STATUS_CODE_ERROR = 2
_VARINT, _FIXED64, _LEN = 0, 1, 2
_DOUBLE = struct.Struct("<d")
_FIXED = struct.Struct("<Q")


_SMALL = tuple(bytes((i,)) for i in range(128))


def _varint(value: int) -> bytes:
    if 0 <= value < 128:
        return _SMALL[value]
    if value < 0:
        value += 1 << 64  # int64: two's complement, ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@lru_cache(maxsize=64)
def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _len(field: int, payload: bytes) -> bytes:
    n = len(payload)
    return _LEN_TAGS[field] + (_SMALL[n] if n < 128 else _varint(n)) + payload


_LEN_TAGS = tuple(_tag(field, _LEN) for field in range(16))


def _str(field: int, text: str) -> bytes:
    return _len(field, text.encode("utf-8", "replace"))


def _fixed64(field: int, value: int) -> bytes:
    return _tag(field, _FIXED64) + _FIXED.pack(min(max(value, 0), (1 << 64) - 1))


@lru_cache(maxsize=4096, typed=True)
def _attribute(key: str, value: AttrValue) -> bytes:
    """A KeyValue's fields; repeated pairs (suite, agent, verdict, type) come from the cache."""
    return _str(1, key) + _len(2, _any(value))


def _any(value: AttrValue) -> bytes:
    if isinstance(value, bool):
        return _tag(2, _VARINT) + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return _tag(3, _VARINT) + _varint(value)
    if isinstance(value, float):
        return _tag(4, _FIXED64) + _DOUBLE.pack(value)
    return _str(1, value)


def _attributes(field: int, attrs: Mapping[str, AttrValue]) -> bytes:
    return b"".join([_len(field, _attribute(k, v)) for k, v in attrs.items()])


def _envelope(resource: Mapping[str, str], records: bytes) -> bytes:
    """Export*ServiceRequest { Resource* { resource, Scope* { scope, records } } }: the
    logs and traces requests share this shape and these field numbers."""
    scope = _len(1, _str(1, "evalstream")) + records  # InstrumentationScope.name
    body = _len(1, _attributes(1, resource)) + _len(2, scope)
    return _len(1, body)


def encode_logs(events: Sequence[EvaluationEvent], resource: Mapping[str, str]) -> bytes:
    """ExportLogsServiceRequest: one log record per event, event name
    `gen_ai.evaluation.result`, the evaluated span's trace and span id."""
    event_name = _str(12, EVENT_NAME)
    records = []
    for e in events:
        severity = SEVERITY_WARN if e.error else SEVERITY_INFO
        record = b"".join(
            (
                _fixed64(1, e.time_ns),
                _tag(2, _VARINT) + _varint(severity),
                _str(3, "WARN" if e.error else "INFO"),
                _attributes(6, e.attributes),
                _len(9, bytes.fromhex(e.trace_id)),
                _len(10, bytes.fromhex(e.parent_span_id)),
                _fixed64(11, e.time_ns),
                event_name,
            )
        )
        records.append(_len(2, record))  # ScopeLogs.log_records
    return _envelope(resource, b"".join(records))


def encode_spans(events: Sequence[EvaluationEvent], resource: Mapping[str, str]) -> bytes:
    """ExportTraceServiceRequest: one zero-duration INTERNAL span per event, a child of the
    evaluated span; ERROR status when the evaluation errored."""
    spans = []
    for e in events:
        attrs = {**e.attributes, "openinference.span.kind": "EVALUATOR"}
        status = b""
        if e.error:
            message = _str(2, str(e.attributes.get("error.type", "")))
            status = _len(15, message + _tag(3, _VARINT) + _varint(STATUS_CODE_ERROR))
        span = b"".join(
            (
                _len(1, bytes.fromhex(e.trace_id)),
                _len(2, bytes.fromhex(e.span_id)),
                _len(4, bytes.fromhex(e.parent_span_id)),
                _str(5, f"evaluation {e.attributes.get(NAME, '')}"),
                _tag(6, _VARINT) + _varint(SPAN_KIND_INTERNAL),
                _fixed64(7, e.time_ns),
                _fixed64(8, e.time_ns),
                _attributes(9, attrs),
                status,
            )
        )
        spans.append(_len(2, span))  # ScopeSpans.spans
    return _envelope(resource, b"".join(spans))
