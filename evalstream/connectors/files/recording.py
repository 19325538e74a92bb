"""Recordings of Kafka topics: one JSON line per message, optionally zstd-compressed.

A recording keeps everything a replay needs to reproduce a topic exactly: topic, partition,
offset, timestamp, key, headers and value. Values stay readable where that loses nothing:

- `"value": {...}` when the bytes are exactly the compact JSON serialisation of that value
  (what evalstream's producers write), so `jq .value.name` works on a recording;
- `"value_text": "..."` for any other UTF-8 text (other JSON spellings, garbage input);
- `"value_b64": "..."` for bytes that are not UTF-8; no value field at all for a tombstone.

Keys and header values follow the same text / base64 rule. Whichever form is written, the
reader returns the original bytes: a record-replay round trip is byte-identical.

The first line of a file written here is a header (`{"evalstream_recording": 1, ...}`) that
names the format version and what was recorded; readers skip header lines anywhere, so
recordings concatenate. A file whose name ends in `.zst` is a zstd stream (several frames
are fine). Writing and reading stream line by line: memory does not grow with the topic.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO

import orjson
import zstandard

from evalstream.assertions.errors import InputError

JSON = Any
FORMAT_VERSION = 1
HEADER_KEY = "evalstream_recording"
ZSTD_SUFFIX = ".zst"


class RecordingError(InputError):
    """A recording file that cannot be read: names the file, the line and what is wrong."""


@dataclass(frozen=True, slots=True)
class RecordedMessage:
    """One Kafka message as recorded (or as it will be produced by a replay)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# --- encoding ------------------------------------------------------------------------------


def _json_form(data: bytes) -> tuple[bool, JSON]:
    """(True, value) when `data` is exactly orjson's serialisation of a non-null value."""
    if not data or data[0] not in b'{["':  # only containers and strings: numbers re-spell
        return False, None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False, None
    try:
        same = orjson.dumps(value) == data
    except TypeError:  # integers beyond 64 bits
        return False, None
    return same, value


def _text_or_b64(data: bytes) -> tuple[str, str]:
    try:
        return "text", data.decode("utf-8")
    except UnicodeDecodeError:
        return "b64", base64.b64encode(data).decode("ascii")


def encode_message(msg: RecordedMessage) -> bytes:
    """One recording line (without the newline)."""
    out: dict[str, JSON] = {
        "topic": msg.topic,
        "partition": msg.partition,
        "offset": msg.offset,
        "timestamp": msg.timestamp_ms,
    }
    if msg.key is None:
        out["key"] = None
    else:
        form, text = _text_or_b64(msg.key)
        out["key" if form == "text" else "key_b64"] = text
    headers: list[dict[str, JSON]] = []
    for name, raw in msg.headers:
        if raw is None:
            headers.append({"key": name, "value": None})
        else:
            form, text = _text_or_b64(raw)
            headers.append({"key": name, "value" if form == "text" else "value_b64": text})
    out["headers"] = headers
    if msg.value is not None:
        is_json, value = _json_form(msg.value)
        if is_json:
            out["value"] = value
        else:
            form, text = _text_or_b64(msg.value)
            out["value_text" if form == "text" else "value_b64"] = text
    return orjson.dumps(out)


def header_line(source: dict[str, JSON]) -> bytes:
    return orjson.dumps({HEADER_KEY: FORMAT_VERSION, "source": source})


class _LineError(ValueError):
    pass


def _bytes_field(obj: dict[str, JSON], text_key: str, b64_key: str) -> bytes | None:
    if b64_key in obj:
        raw = obj[b64_key]
        if not isinstance(raw, str):
            raise _LineError(f"`{b64_key}` must be a base64 string")
        try:
            return base64.b64decode(raw, validate=True)
        except binascii.Error as exc:
            raise _LineError(f"`{b64_key}` is not valid base64: {exc}") from exc
    text = obj.get(text_key)
    if text is None:
        return None
    if not isinstance(text, str):
        raise _LineError(f"`{text_key}` must be a string or null")
    return text.encode("utf-8")


def _int_field(obj: dict[str, JSON], key: str) -> int:
    value = obj.get(key)
    if type(value) is not int:
        raise _LineError(f"`{key}` must be an integer, got {value!r}")
    return value


def decode_message(obj: dict[str, JSON]) -> RecordedMessage:
    topic = obj.get("topic")
    if not isinstance(topic, str) or not topic:
        raise _LineError("`topic` must be a non-empty string")
    if "value" in obj:
        value: bytes | None = orjson.dumps(obj["value"])
    elif "value_text" in obj or "value_b64" in obj:
        value = _bytes_field(obj, "value_text", "value_b64")
    else:
        value = None  # a tombstone
    raw_headers = obj.get("headers") or []
    if not isinstance(raw_headers, list):
        raise _LineError("`headers` must be a list of {key, value | value_b64}")
    headers: list[tuple[str, bytes | None]] = []
    for h in raw_headers:
        if not isinstance(h, dict) or not isinstance(h.get("key"), str):
            raise _LineError("each header must be an object {key, value | value_b64}")
        headers.append((h["key"], _bytes_field(h, "value", "value_b64")))
    return RecordedMessage(
        topic=topic,
        partition=_int_field(obj, "partition"),
        offset=_int_field(obj, "offset"),
        timestamp_ms=_int_field(obj, "timestamp"),
        key=_bytes_field(obj, "key", "key_b64"),
        value=value,
        headers=tuple(headers),
    )


# --- files -------------------------------------------------------------------------------


def is_compressed(path: str | Path) -> bool:
    return str(path).endswith(ZSTD_SUFFIX)


class RecordingWriter:
    """Appends messages to a recording; `close()` always leaves a complete, valid file.

    Lines are written whole; `flush()` pushes buffered lines (and, compressed, a finished
    zstd block) to the file, so a reader following the file sees complete records only.
    """

    def __init__(
        self, path: str | Path, source: dict[str, JSON], *, compress: bool | None = None
    ) -> None:
        self.path = Path(path)
        self.compress = is_compressed(path) if compress is None else compress
        try:
            self._file: BinaryIO = self.path.open("wb")
        except OSError as exc:
            raise RecordingError(f"cannot write {path}: {exc.strerror or exc}") from exc
        self._zstd: zstandard.ZstdCompressionWriter | None = None
        self._out: IO[bytes] = self._file
        if self.compress:
            self._zstd = zstandard.ZstdCompressor(level=3).stream_writer(self._file, closefd=False)
            self._out = self._zstd
        self.count = 0
        self._out.write(header_line(source) + b"\n")

    def write(self, msg: RecordedMessage) -> None:
        self._out.write(encode_message(msg) + b"\n")
        self.count += 1

    def flush(self) -> None:
        if self._zstd is not None:
            self._zstd.flush(zstandard.FLUSH_BLOCK)
        self._file.flush()

    def close(self) -> None:
        if self._file.closed:
            return
        if self._zstd is not None:
            self._zstd.flush(zstandard.FLUSH_FRAME)  # ends the frame: a complete zstd stream
        self._file.close()

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RecordingReader:
    """Iterates the messages of a recording; `position()` is the progress in file bytes.

    A compressed file is decoded frame by frame; one that ends inside a frame (a writer that
    was killed, a cut copy) yields its complete lines and then raises `RecordingError`."""

    CHUNK = 1 << 16

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._file: BinaryIO = self.path.open("rb")
        except OSError as exc:
            raise RecordingError(f"cannot read {path}: {exc.strerror or exc}") from exc
        self.size = self.path.stat().st_size
        self.compressed = is_compressed(path)

    def position(self) -> int:
        return self._file.tell()

    def __iter__(self) -> Iterator[RecordedMessage]:
        lines = self._zstd_lines() if self.compressed else iter(self._file)
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            msg = self._decode(line, number)
            if msg is not None:
                yield msg

    def _zstd_lines(self) -> Iterator[bytes]:
        pending = b""
        frame = zstandard.ZstdDecompressor().decompressobj()
        started = False  # bytes of the current frame were consumed
        while chunk := self._file.read(self.CHUNK):
            while chunk:
                try:
                    data = frame.decompress(chunk)
                except zstandard.ZstdError as exc:
                    raise RecordingError(f"{self.path}: not a valid zstd stream: {exc}") from exc
                started = True
                chunk = b""
                if frame.eof:  # the next frame (concatenated recordings) starts here
                    chunk = frame.unused_data
                    frame = zstandard.ZstdDecompressor().decompressobj()
                    started = False
                pending += data
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    yield line + b"\n"
        if started:
            raise RecordingError(
                f"{self.path}: the file ends inside a zstd frame (a truncated or unfinished "
                "recording); the messages before this point were read"
            )
        if pending:
            yield pending

    def _decode(self, line: bytes, number: int) -> RecordedMessage | None:
        """The message of one line; None for a header line."""
        where = f"{self.path}:{number}"
        if not line.endswith(b"\n"):
            raise RecordingError(f"{where}: the last line is incomplete (a truncated file)")
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise RecordingError(f"{where}: not a JSON line: {exc}") from exc
        if not isinstance(obj, dict):
            raise RecordingError(f"{where}: a recording line must be a JSON object")
        if HEADER_KEY in obj:
            version = obj[HEADER_KEY]
            if version != FORMAT_VERSION:
                raise RecordingError(
                    f"{where}: recording format version {version!r} is not supported "
                    f"(this evalstream reads version {FORMAT_VERSION}); upgrade evalstream"
                )
            return None
        try:
            return decode_message(obj)
        except _LineError as exc:
            raise RecordingError(f"{where}: {exc}") from exc

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- episode ids ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeRename:
    """Rewrites episode ids (`prefix + id + suffix`) so a replay never merges with live ones.

    Both places that name the episode change together: the message key (it decides the
    partition, and the worker rejects a key that differs from the signal's episode id) and
    the `episode_id` field of a JSON object value. Values that are not JSON objects, or name
    no episode, keep their bytes; so does everything else in the message."""

    prefix: str = ""
    suffix: str = ""

    def __bool__(self) -> bool:
        return bool(self.prefix or self.suffix)

    def episode(self, episode_id: str) -> str:
        return f"{self.prefix}{episode_id}{self.suffix}"

    def apply(self, msg: RecordedMessage) -> RecordedMessage:
        if not self:
            return msg
        key = msg.key
        if key is not None:
            # A key that is not UTF-8 names no episode: kept, so it is dead-lettered as before.
            with contextlib.suppress(UnicodeDecodeError):
                key = self.episode(key.decode("utf-8")).encode("utf-8")
        value = msg.value
        if value is not None and value[:1] == b"{":
            try:
                obj = orjson.loads(value)
            except orjson.JSONDecodeError:
                obj = None
            if (
                isinstance(obj, dict)
                and isinstance(obj.get("episode_id"), str)
                and obj["episode_id"]
            ):
                obj["episode_id"] = self.episode(obj["episode_id"])  # same key position
                value = orjson.dumps(obj)
        return RecordedMessage(
            msg.topic, msg.partition, msg.offset, msg.timestamp_ms, key, value, msg.headers
        )
