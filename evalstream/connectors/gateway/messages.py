"""Reading Anthropic Messages API responses for recording: a whole JSON message, or a
server-sent event stream fed chunk by chunk as it passes through the proxy.

`MessageAccumulator.feed(chunk)` never buffers more than one unfinished SSE line; the proxy
forwards every chunk before feeding it, so recording adds no delay to the stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

JSON = Any


@dataclass
class MessageSummary:
    """What the recording needs from one response message."""

    message_id: str | None = None
    model: str | None = None
    text: str = ""
    tool_calls: list[dict[str, JSON]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    error: dict[str, JSON] | None = None  # an `error` event inside a stream
    complete: bool = False


def _usage(raw: JSON, into: dict[str, int]) -> None:
    if not isinstance(raw, dict):
        return
    for key in (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ):
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            into[key] = max(0, value)


def summarize_message(message: JSON) -> MessageSummary:
    """A non-streaming response body (already decoded)."""
    summary = MessageSummary()
    if not isinstance(message, dict):
        return summary
    summary.message_id = _s(message.get("id"))
    summary.model = _s(message.get("model"))
    summary.stop_reason = _s(message.get("stop_reason"))
    _usage(message.get("usage"), summary.usage)
    texts = []
    blocks = message.get("content")
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") in ("tool_use", "server_tool_use"):
            summary.tool_calls.append(
                {"id": block.get("id"), "name": block.get("name"), "input": block.get("input")}
            )
    summary.text = "".join(texts)
    summary.complete = True
    return summary


def _s(value: JSON) -> str | None:
    return value if isinstance(value, str) else None


class MessageAccumulator:
    """Builds a `MessageSummary` from a Messages API event stream."""

    MAX_LINE = 4 * 1024 * 1024  # a longer unfinished line is dropped, not buffered forever

    def __init__(self) -> None:
        self.summary = MessageSummary()
        self._pending = b""
        self._data: list[bytes] = []
        self._blocks: dict[int, dict[str, JSON]] = {}
        self._texts: list[str] = []

    def feed(self, chunk: bytes) -> None:
        data = self._pending + chunk if self._pending else chunk
        lines = data.split(b"\n")
        self._pending = lines.pop()
        if len(self._pending) > self.MAX_LINE:
            self._pending = b""
        for line in lines:
            self._line(line.rstrip(b"\r"))

    def _line(self, line: bytes) -> None:
        if not line:
            if self._data:
                payload = b"\n".join(self._data)
                self._data = []
                self._event(payload)
        elif line.startswith(b"data:"):
            self._data.append(line[5:].lstrip(b" "))
        # `event:` names repeat the `type` inside the data; comments (`:`) are ignored

    def _event(self, payload: bytes) -> None:
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        s = self.summary
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            s.message_id = _s(message.get("id"))
            s.model = _s(message.get("model"))
            _usage(message.get("usage"), s.usage)
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            index = event.get("index")
            if isinstance(index, int):
                block = dict(event["content_block"])
                block["_json"] = []
                self._blocks[index] = block
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    self._texts.append(block["text"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            self._delta(event.get("index"), event["delta"])
        elif kind == "content_block_stop":
            self._block_stop(event.get("index"))
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                s.stop_reason = delta["stop_reason"]
            _usage(event.get("usage"), s.usage)
        elif kind == "message_stop":
            s.text = "".join(self._texts)
            s.complete = True
        elif kind == "error":
            error = event.get("error")
            s.error = error if isinstance(error, dict) else {"message": str(error)}

    def _delta(self, index: JSON, delta: dict[str, JSON]) -> None:
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            self._texts.append(delta["text"])
        elif kind == "input_json_delta" and isinstance(index, int) and index in self._blocks:
            partial = delta.get("partial_json")
            if isinstance(partial, str):
                self._blocks[index]["_json"].append(partial)

    def _block_stop(self, index: JSON) -> None:
        block = self._blocks.pop(index, None) if isinstance(index, int) else None
        if block is None or block.get("type") not in ("tool_use", "server_tool_use"):
            return
        raw = "".join(block["_json"])
        tool_input: JSON = block.get("input")
        if raw:
            try:
                tool_input = orjson.loads(raw)
            except orjson.JSONDecodeError:
                tool_input = raw
        self.summary.tool_calls.append(
            {"id": block.get("id"), "name": block.get("name"), "input": tool_input}
        )

    def finish(self) -> MessageSummary:
        if self._pending:
            self._line(self._pending)
            self._pending = b""
        self._line(b"")
        if not self.summary.complete:
            self.summary.text = "".join(self._texts)
        return self.summary
