"""Decoding OTLP/HTTP trace requests, protobuf or JSON, into plain `Span` records.

Both encodings give the same `Span`s; attribute values become JSON values, bounded in nesting
depth and string length. Anything that is not a valid request raises `SignalDecodeError`
(`bad_otlp`, `too_deep` or `string_too_long`), never another exception.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from evalstream.assertions.errors import SignalDecodeError

JSON = Any
_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
KIND_NAMES = {v: k[len("SPAN_KIND_") :].lower() for k, v in _KINDS.items()}


@dataclass(slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attrs: dict[str, JSON]
    status_code: int = 0
    status_message: str = ""
    resource: dict[str, JSON] = field(default_factory=dict)
    exception: str | None = None


@dataclass(frozen=True, slots=True)
class ValueLimits:
    """Bounds on attribute values (nesting depth and string length)."""

    max_depth: int = 32
    max_string_length: int = 256 * 1024


DEFAULT_LIMITS = ValueLimits()


def _bad(message: str) -> SignalDecodeError:
    return SignalDecodeError("bad_otlp", message)


# --- protobuf -------------------------------------------------------------------------------


def decode_protobuf(body: bytes, limits: ValueLimits = DEFAULT_LIMITS) -> list[Span]:
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise _bad(f"not an OTLP ExportTraceServiceRequest (protobuf): {exc}") from exc
    spans: list[Span] = []
    for resource_spans in request.resource_spans:
        resource = _pb_attrs(resource_spans.resource.attributes, limits)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                exception = None
                for event in s.events:
                    if event.name == "exception":
                        ev = _pb_attrs(event.attributes, limits)
                        exception = _str(ev.get("exception.message")) or _str(
                            ev.get("exception.type")
                        )
                spans.append(
                    Span(
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex() or None,
                        name=s.name,
                        kind=int(s.kind),
                        start_ns=int(s.start_time_unix_nano),
                        end_ns=int(s.end_time_unix_nano),
                        attrs=_pb_attrs(s.attributes, limits),
                        status_code=int(s.status.code),
                        status_message=s.status.message,
                        resource=resource,
                        exception=exception,
                    )
                )
    return spans


def _pb_attrs(kvs: Iterable[Any], limits: ValueLimits) -> dict[str, JSON]:
    return {kv.key: _pb_value(kv.value, limits, 1) for kv in kvs}


def _pb_value(value: AnyValue, limits: ValueLimits, depth: int) -> JSON:
    which = value.WhichOneof("value")
    if which == "string_value":
        return _checked_str(value.string_value, limits)
    if which == "bool_value":
        return value.bool_value
    if which == "int_value":
        return value.int_value
    if which == "double_value":
        return value.double_value
    if which == "bytes_value":
        return _checked_str(base64.b64encode(value.bytes_value).decode("ascii"), limits)
    if which in ("array_value", "kvlist_value"):
        _check_depth(depth, limits)
        if which == "array_value":
            return [_pb_value(v, limits, depth + 1) for v in value.array_value.values]
        return {kv.key: _pb_value(kv.value, limits, depth + 1) for kv in value.kvlist_value.values}
    return None


# --- JSON -------------------------------------------------------------------------------------


def decode_json(body: bytes, limits: ValueLimits = DEFAULT_LIMITS) -> list[Span]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc):
            raise SignalDecodeError("too_deep", f"OTLP JSON nests too deep: {exc}") from exc
        raise _bad(f"not valid OTLP JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise _bad("OTLP JSON must be an object with `resourceSpans`")
    spans: list[Span] = []
    for raw_resource in _list(doc.get("resourceSpans"), "resourceSpans"):
        resource_spans = _obj(raw_resource, "resourceSpans[]")
        resource = _obj(resource_spans.get("resource") or {}, "resource")
        resource_attrs = _json_attrs(resource.get("attributes"), limits)
        scopes = resource_spans.get("scopeSpans")
        if scopes is None:  # the name before OTLP 1.0
            scopes = resource_spans.get("instrumentationLibrarySpans")
        for raw_scope in _list(scopes, "scopeSpans"):
            scope_spans = _obj(raw_scope, "scopeSpans[]")
            for raw in _list(scope_spans.get("spans"), "spans"):
                spans.append(_json_span(_obj(raw, "spans[]"), resource_attrs, limits))
    return spans


def _json_span(raw: dict[str, JSON], resource: dict[str, JSON], limits: ValueLimits) -> Span:
    trace_id = _json_id(raw.get("traceId"), 16, "traceId")
    span_id = _json_id(raw.get("spanId"), 8, "spanId")
    parent = raw.get("parentSpanId")
    parent_id = _json_id(parent, 8, "parentSpanId") if parent else None
    if trace_id is None or span_id is None:
        raise _bad("every span needs a `traceId` and a `spanId`")
    status = raw.get("status") or {}
    status = status if isinstance(status, dict) else {}
    code = status.get("code", 0)
    if isinstance(code, str):
        code = {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(code, 0)
    kind = raw.get("kind", 0)
    if isinstance(kind, str):
        kind = _KINDS.get(kind, 0)
    exception = None
    for event in _list(raw.get("events"), "events"):
        if isinstance(event, dict) and event.get("name") == "exception":
            ev = _json_attrs(event.get("attributes"), limits)
            exception = _str(ev.get("exception.message")) or _str(ev.get("exception.type"))
    name = raw.get("name")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_id,
        name=_checked_str(name, limits) if isinstance(name, str) else "",
        kind=kind if isinstance(kind, int) and not isinstance(kind, bool) else 0,
        start_ns=_json_nanos(raw.get("startTimeUnixNano"), "startTimeUnixNano"),
        end_ns=_json_nanos(raw.get("endTimeUnixNano"), "endTimeUnixNano"),
        attrs=_json_attrs(raw.get("attributes"), limits),
        status_code=code if isinstance(code, int) and not isinstance(code, bool) else 0,
        status_message=_str(status.get("message")) or "",
        resource=resource,
        exception=exception,
    )


def _list(value: JSON, what: str) -> list[JSON]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(f"OTLP JSON `{what}` must be a list")
    return value


def _obj(value: JSON, what: str) -> dict[str, JSON]:
    if not isinstance(value, dict):
        raise _bad(f"OTLP JSON `{what}` must be an object")
    return value


def _json_id(value: JSON, size: int, what: str) -> str | None:
    """OTLP JSON ids are hex; base64 (the plain protobuf JSON mapping) is accepted too."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _bad(f"`{what}` must be a hex string")
    if len(value) == 2 * size:
        try:
            return bytes.fromhex(value).hex()
        except ValueError:
            pass
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == size:
        return raw.hex()
    raise _bad(f"`{what}` {value[:40]!r} is not {size} bytes of hex")


def _json_nanos(value: JSON, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise _bad(f"`{what}` must be an integer (nanoseconds)")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 20:
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and abs(value) < 1e20:
        return int(value)
    raise _bad(f"`{what}` must be an integer (nanoseconds), got {str(value)[:40]!r}")


def _json_attrs(value: JSON, limits: ValueLimits) -> dict[str, JSON]:
    out: dict[str, JSON] = {}
    for kv in _list(value, "attributes"):
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[_checked_str(kv["key"], limits)] = _json_value(kv.get("value"), limits, 1)
    return out


def _json_value(value: JSON, limits: ValueLimits, depth: int) -> JSON:
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        s = value["stringValue"]
        return _checked_str(s, limits) if isinstance(s, str) else None
    if "boolValue" in value:
        return value["boolValue"] if isinstance(value["boolValue"], bool) else None
    if "intValue" in value:
        raw = value["intValue"]
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lstrip("-").isdigit() and len(raw) <= 20:
            return int(raw)
        return None
    if "doubleValue" in value:
        raw = value["doubleValue"]
        return float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
    if "bytesValue" in value:
        raw = value["bytesValue"]
        return _checked_str(raw, limits) if isinstance(raw, str) else None
    if "arrayValue" in value or "kvlistValue" in value:
        _check_depth(depth, limits)
        if "arrayValue" in value:
            inner = value["arrayValue"]
            items = inner.get("values") if isinstance(inner, dict) else None
            return [_json_value(v, limits, depth + 1) for v in _list(items, "values")]
        inner = value["kvlistValue"]
        kvs = inner.get("values") if isinstance(inner, dict) else None
        out = {}
        for kv in kvs if isinstance(kvs, list) else []:
            if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                out[_checked_str(kv["key"], limits)] = _json_value(
                    kv.get("value"), limits, depth + 1
                )
        return out
    return None


def _check_depth(depth: int, limits: ValueLimits) -> None:
    if depth >= limits.max_depth:
        raise SignalDecodeError(
            "too_deep", f"an attribute value nests deeper than {limits.max_depth} levels"
        )


def _checked_str(value: str, limits: ValueLimits) -> str:
    if len(value) > limits.max_string_length:
        raise SignalDecodeError(
            "string_too_long",
            f"an attribute or name is longer than {limits.max_string_length} characters",
        )
    return value


def _str(value: JSON) -> str | None:
    return value if isinstance(value, str) and value else None
