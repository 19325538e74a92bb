"""Request limits: body size (also after decompression), items per request, JSON nesting depth
and string length. Each breach has its own status and code, and is found before anything is
published.

| breach                         | status | code              |
|--------------------------------|--------|-------------------|
| body larger than max_body_bytes | 413    | body_too_large    |
| more items than max_signals     | 413    | too_many_signals  |
| nesting deeper than max_depth   | 422    | too_deep          |
| a string longer than the limit  | 422    | string_too_long   |
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
import zstandard

from evalstream.connectors.gateway.errors import Rejected

JSON = Any
NDJSON_TYPES = frozenset(
    {"application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines"}
)


@dataclass(frozen=True, slots=True)
class Limits:
    max_body_bytes: int = 8 * 1024 * 1024
    max_items: int = 10_000
    max_depth: int = 32
    max_string_length: int = 256 * 1024


def body_too_large(limits: Limits, what: str = "request body") -> Rejected:
    return Rejected(
        413,
        "body_too_large",
        f"{what} exceeds {limits.max_body_bytes} bytes; send smaller batches",
        limit=limits.max_body_bytes,
    )


def too_many(limits: Limits, count: int) -> Rejected:
    return Rejected(
        413,
        "too_many_signals",
        f"{count} records in one request exceed {limits.max_items}; split the batch",
        limit=limits.max_items,
    )


async def read_body(
    chunks: AsyncIterator[bytes], content_length: str | None, limits: Limits
) -> bytes:
    """The raw body, refused as soon as it is known to be too large (no full buffering)."""
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise Rejected(400, "bad_content_length", "Content-Length is not a number") from None
        if declared > limits.max_body_bytes:
            raise body_too_large(limits)
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise body_too_large(limits)
        parts.append(chunk)
    return b"".join(parts)


def decode_content(body: bytes, encoding: str | None, limits: Limits) -> bytes:
    """Undo Content-Encoding (gzip, deflate, zstd), bounded so a small bomb cannot expand."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        return body
    if enc in ("gzip", "x-gzip", "deflate"):
        # gzip: 47 detects a gzip or zlib header; deflate: zlib-wrapped (0x78...) or raw
        wbits = 47 if enc != "deflate" else (15 if body[:1] == b"\x78" else -15)
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(body, limits.max_body_bytes + 1)
        except zlib.error as exc:
            raise Rejected(400, "bad_encoding", f"body is not valid {enc}: {exc}") from exc
        if len(out) > limits.max_body_bytes or inflater.unconsumed_tail:
            raise body_too_large(limits, "decompressed body")
        if not inflater.eof:
            raise Rejected(400, "bad_encoding", f"body is truncated {enc}")
        return out
    if enc == "zstd":
        try:
            reader = zstandard.ZstdDecompressor().decompressobj()
            out = reader.decompress(body)
        except zstandard.ZstdError as exc:
            raise Rejected(400, "bad_encoding", f"body is not valid zstd: {exc}") from exc
        if len(out) > limits.max_body_bytes:
            raise body_too_large(limits, "decompressed body")
        return out
    raise Rejected(
        415,
        "unsupported_encoding",
        f"Content-Encoding {encoding!r} is not supported; use gzip, deflate, zstd or none",
    )


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _loads(data: bytes, where: str, limits: Limits) -> JSON:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "recursion" in str(exc):
            raise _deep(where, limits.max_depth) from exc
        raise Rejected(400, "invalid_json", f"{where} is not valid JSON: {exc}") from exc


def json_items(body: bytes, content_type: str | None, limits: Limits) -> list[JSON]:
    """The records of a body: a JSON array, one JSON object, or NDJSON (one per line).

    A body that is not one JSON document but whose lines are is read as NDJSON whatever its
    content type says (curl sends form-encoded, some loggers send NDJSON as JSON)."""
    stripped = body.strip()
    if not stripped:
        raise Rejected(400, "empty_body", "the request body is empty; send JSON or NDJSON")
    if media_type(content_type) in NDJSON_TYPES:
        return _ndjson(body, limits)  # checks each line as it goes
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if b"\n" not in stripped or "depth" in str(exc):
            _loads(body, "the body", limits)  # raises the precise error
        return _ndjson(body, limits)
    items = doc if isinstance(doc, list) else [doc]
    if len(items) > limits.max_items:
        raise too_many(limits, len(items))
    if not _obviously_within(body, limits):
        for index, item in enumerate(items):
            check_value(item, limits, index)
    return items


def _ndjson(body: bytes, limits: Limits) -> list[JSON]:
    lines = [(n, line) for n, line in enumerate(body.split(b"\n"), start=1) if line.strip()]
    if len(lines) > limits.max_items:
        raise too_many(limits, len(lines))
    items = []
    for index, (n, line) in enumerate(lines):
        item = _loads(line, f"line {n}", limits)
        if not _obviously_within(line, limits):
            check_value(item, limits, index)
        items.append(item)
    return items


def _obviously_within(raw: bytes, limits: Limits) -> bool:
    """No string can be longer than the raw text, nor nesting deeper than its brackets."""
    return (
        len(raw) <= limits.max_string_length
        and raw.count(b"{") + raw.count(b"[") <= limits.max_depth
    )


def check_value(value: JSON, limits: Limits, index: int | None = None) -> None:
    """Depth and string-length limits over one decoded item (iterative: no recursion)."""
    max_depth, max_len = limits.max_depth, limits.max_string_length
    where = f"record {index}" if index is not None else "the body"
    stack: list[tuple[JSON, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        kind = type(node)
        if kind is str:
            if len(node) > max_len:
                raise _long(where, max_len)
        elif kind is dict:
            if depth > max_depth:
                raise _deep(where, max_depth)
            for key, child in node.items():
                if len(key) > max_len:
                    raise _long(where, max_len)
                child_kind = type(child)
                if child_kind is dict or child_kind is list:
                    stack.append((child, depth + 1))
                elif child_kind is str and len(child) > max_len:
                    raise _long(where, max_len)
        elif kind is list:
            if depth > max_depth:
                raise _deep(where, max_depth)
            for child in node:
                child_kind = type(child)
                if child_kind is dict or child_kind is list:
                    stack.append((child, depth + 1))
                elif child_kind is str and len(child) > max_len:
                    raise _long(where, max_len)


def _deep(where: str, limit: int) -> Rejected:
    return Rejected(422, "too_deep", f"{where} nests JSON deeper than {limit} levels", limit=limit)


def _long(where: str, limit: int) -> Rejected:
    return Rejected(
        422,
        "string_too_long",
        f"{where} has a string longer than {limit} characters",
        limit=limit,
    )
