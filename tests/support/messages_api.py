"""A local HTTP server speaking the Anthropic Messages API, for tests with the real SDK.

It listens on 127.0.0.1 on a free port, handles each connection on its own thread and
answers:

- ``POST /v1/messages`` with a JSON ``Message`` or, when the request says ``"stream": true``,
  an SSE stream with the event sequence of the real API: ``message_start``, ``ping``, per
  content block ``content_block_start`` / ``content_block_delta`` (``text_delta`` or
  ``input_json_delta``) / ``content_block_stop``, ``message_delta`` (stop reason and output
  usage) and ``message_stop``;
- ``POST /v1/messages/count_tokens`` with ``{"input_tokens": n}`` (can be switched off);
- the Message Batches API: ``POST /v1/messages/batches`` (each request's params answered by
  the handler at once, its result kept until the batch ends), ``GET
  /v1/messages/batches/{id}`` (``in_progress`` for the first `batch_polls` retrieves, then
  ``ended`` with the request counts) and ``GET /v1/messages/batches/{id}/results`` (JSONL,
  one line per request). `batch_outcome` decides each request's outcome from its
  ``custom_id`` and params: ``succeeded`` (the default), ``errored``, ``expired`` or
  ``canceled``;
- anything else with a 404 in the API's error shape.

Replies are programmable per request. A *handler* receives the parsed `MessagesRequest`
(body and headers) and returns a `Reply` (text and tool_use blocks, usage, stop reason,
delay), a plain ``str`` (shorthand for a one-text-block reply) or an `ErrorReply` (status,
Anthropic error body, optional ``retry-after`` / ``x-should-retry`` headers, delay). Replies
queued with `MessagesAPIServer.enqueue` are served first, in order, before the handler is
asked. Every request is recorded (`MessagesAPIServer.requests`) for assertions.

With ``prompt_cache=True`` the default usage behaves like the API's prompt cache: the prefix
up to the last block marked ``cache_control`` (tools, then system blocks, then message
blocks) is reported as ``cache_creation_input_tokens`` the first time it is seen and as
``cache_read_input_tokens`` afterwards; the rest is ``input_tokens``.

Example::

    with MessagesAPIServer(handler=lambda req: Reply.text("hi")) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test")
        client.messages.create(model="m", max_tokens=10, messages=[...])
        assert server.requests[0].body["model"] == "m"

As a pytest fixture: ``from tests.support.messages_api import messages_api`` in a
``conftest.py`` (it yields a started server, stopped after the test).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import pytest

__all__ = [
    "Batch",
    "ErrorReply",
    "Handler",
    "MessagesAPIServer",
    "MessagesRequest",
    "RecordedRequest",
    "Reply",
    "TextBlock",
    "ToolUseBlock",
    "Usage",
    "estimate_tokens",
    "messages_api",
]

MESSAGES_PATH = "/v1/messages"
BATCHES_PATH = "/v1/messages/batches"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"

# The error ``type`` the real API sends for each status.
ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class TextBlock:
    """A ``text`` content block."""

    text: str

    def as_json(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True)
class ToolUseBlock:
    """A ``tool_use`` content block; ``id`` is generated when left empty."""

    name: str
    input: Mapping[str, Any]
    id: str = ""

    def as_json(self, fallback_id: str) -> dict[str, Any]:
        return {
            "type": "tool_use",
            "id": self.id or fallback_id,
            "name": self.name,
            "input": dict(self.input),
        }


ContentBlock = TextBlock | ToolUseBlock


@dataclass(frozen=True)
class Usage:
    """Token usage as the API reports it."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }


@dataclass(frozen=True)
class Reply:
    """A successful answer.

    ``stop_reason`` defaults to ``"tool_use"`` when a tool_use block is present, else
    ``"end_turn"``. ``usage`` defaults to `estimate_tokens` of the request and the reply.
    ``model`` defaults to the requested model. ``delay`` (seconds) is waited before the
    response starts; ``event_delay`` between SSE events when streaming. ``stream_error``
    ends a stream with an ``error`` event after the content blocks (the real API does this
    for e.g. ``overloaded_error`` mid-stream); it is ignored for JSON replies.
    """

    content: Sequence[ContentBlock] = (TextBlock("ok"),)
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage | None = None
    model: str | None = None
    delay: float = 0.0
    event_delay: float = 0.0
    stream_error: ErrorReply | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def text(cls, text: str, **kwargs: Any) -> Reply:
        """A reply with a single text block."""
        return cls(content=(TextBlock(text),), **kwargs)

    @classmethod
    def tool_use(
        cls, name: str, tool_input: Mapping[str, Any], *, text: str | None = None, **kwargs: Any
    ) -> Reply:
        """A reply calling one tool, optionally preceded by a text block."""
        blocks: list[ContentBlock] = [] if text is None else [TextBlock(text)]
        blocks.append(ToolUseBlock(name, tool_input))
        return cls(content=tuple(blocks), **kwargs)


@dataclass(frozen=True)
class ErrorReply:
    """An error answer with the API's error body ``{"type": "error", "error": {...}}``.

    ``error_type`` defaults to the real API's type for ``status`` (`ERROR_TYPES`).
    ``retry_after`` (seconds) sets the ``retry-after`` header; ``should_retry`` sets
    ``x-should-retry`` (the SDK obeys it over its own status rules).
    """

    status: int
    message: str = "error from the test server"
    error_type: str | None = None
    retry_after: float | None = None
    should_retry: bool | None = None
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        kind = self.error_type or ERROR_TYPES.get(self.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": self.message}}

    def response_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.retry_after is not None:
            headers["retry-after"] = _format_seconds(self.retry_after)
        if self.should_retry is not None:
            headers["x-should-retry"] = "true" if self.should_retry else "false"
        return headers


@dataclass(frozen=True)
class MessagesRequest:
    """A parsed request as the handler sees it; header names are lower case."""

    path: str
    body: Mapping[str, Any]
    headers: Mapping[str, str]

    @property
    def api_key(self) -> str | None:
        """The key sent as ``x-api-key`` or, as newer SDKs do, ``authorization: Bearer``."""
        return _api_key(self.headers)

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream", False))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def system_text(self) -> str:
        """The system prompt as one string (string form or joined text blocks)."""
        return _text_of(self.body.get("system", ""))

    @property
    def last_user_text(self) -> str:
        """The text of the last user message (string content or joined text blocks)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _text_of(message.get("content", ""))
        return ""

    def all_text(self) -> str:
        """System prompt and every message's text, joined by newlines."""
        parts = [self.system_text] + [_text_of(m.get("content", "")) for m in self.messages]
        return "\n".join(p for p in parts if p)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received: method, path, lower-cased headers, parsed JSON body
    (``None`` when the body was not JSON) and the raw bytes."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    raw: bytes

    @property
    def api_key(self) -> str | None:
        """The key sent as ``x-api-key`` or, as newer SDKs do, ``authorization: Bearer``."""
        return _api_key(self.headers)

    @property
    def system_text(self) -> str:
        """The system prompt as one string (string form or joined text blocks)."""
        return _text_of(self.body.get("system", "")) if isinstance(self.body, dict) else ""


HandlerResult = Reply | ErrorReply | str
Handler = Callable[[MessagesRequest], HandlerResult]
BatchOutcome = Callable[[str, MessagesRequest], str]


@dataclass
class Batch:
    """A message batch the server holds: each request's result line, and its retrieves."""

    id: str
    results: list[dict[str, Any]]
    retrieves: int = 0

    def ended(self, polls: int) -> bool:
        return self.retrieves > polls

    def as_json(self, base_url: str, polls: int) -> dict[str, Any]:
        ended = self.ended(polls)
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        for line in self.results:
            counts[line["result"]["type"] if ended else "processing"] += 1
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": "2026-11-01T00:00:00Z",
            "expires_at": "2026-11-02T00:00:00Z",
            "ended_at": "2026-11-01T01:00:00Z" if ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{base_url}{BATCHES_PATH}/{self.id}/results" if ended else None,
        }


CountTokensHandler = Callable[[MessagesRequest], int]


def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for tokenisation: about four characters per token."""
    return max(1, (len(text) + 3) // 4)


def default_handler(request: MessagesRequest) -> HandlerResult:
    """Answers ``"ok"`` to every request."""
    return Reply.text("ok")


class MessagesAPIServer:
    """The server. Start with `start` or ``with``; `base_url` is what the SDK takes.

    ``strict`` rejects, like the real API, a messages request without ``model``,
    ``max_tokens`` or ``messages`` (400 ``invalid_request_error``), so a client bug shows.
    """

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        count_tokens: CountTokensHandler | None = None,
        count_tokens_enabled: bool = True,
        strict: bool = True,
        prompt_cache: bool = False,
        batch_polls: int = 1,
        batch_outcome: BatchOutcome | None = None,
    ) -> None:
        self.handler: Handler = handler or default_handler
        self.batch_polls = batch_polls
        self.batch_outcome: BatchOutcome = batch_outcome or (lambda custom_id, r: "succeeded")
        self.batches: dict[str, Batch] = {}
        self.count_tokens: CountTokensHandler = count_tokens or (
            lambda request: estimate_tokens(request.all_text())
        )
        self.count_tokens_enabled = count_tokens_enabled
        self.strict = strict
        self.prompt_cache = prompt_cache
        self._cached_prefixes: set[str] = set()
        self._lock = threading.Lock()
        self._queued: deque[HandlerResult] = deque()
        self._requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        if self._http is not None:
            return self
        self._stopping.clear()
        http = _HTTPServer(("127.0.0.1", 0), _RequestHandler)
        http.api = self
        self._http = http
        self._thread = threading.Thread(
            target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        http, thread = self._http, self._thread
        if http is None:
            return
        self._stopping.set()  # wakes delayed replies
        http.shutdown()
        http.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:  # idle keep-alive connections would otherwise linger
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if thread is not None:
            thread.join(timeout=5)
        self._http = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._http is None:
            raise RuntimeError("the server is not started; call start() or use `with`")
        return int(self._http.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the SDK appends ``/v1/messages``)."""
        return f"http://127.0.0.1:{self.port}"

    # --- programming and inspection ----------------------------------------------------

    def enqueue(self, *replies: HandlerResult) -> None:
        """Serve these replies to the next messages requests, in order, before the handler."""
        with self._lock:
            self._queued.extend(replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (all paths), oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def messages_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/messages`` requests only."""
        return [r for r in self.requests if r.path == MESSAGES_PATH]

    def requests_to(self, method: str, path: str) -> list[RecordedRequest]:
        """The requests with this method and path."""
        return [r for r in self.requests if r.method == method and r.path == path]

    def clear(self) -> None:
        """Forget recorded requests and queued replies."""
        with self._lock:
            self._requests.clear()
            self._queued.clear()

    # --- used by the request handler ---------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_result(self, request: MessagesRequest) -> HandlerResult:
        with self._lock:
            queued = self._queued.popleft() if self._queued else None
        return queued if queued is not None else self.handler(request)

    def default_usage(self, request: MessagesRequest, output_tokens: int) -> Usage:
        """`estimate_tokens` of the request, split by the simulated prompt cache when on."""
        prefix, rest = _cache_split(request.body) if self.prompt_cache else ("", "")
        if not prefix:
            return Usage(estimate_tokens(request.all_text()), output_tokens)
        with self._lock:
            seen = prefix in self._cached_prefixes
            self._cached_prefixes.add(prefix)
        cached = estimate_tokens(prefix)
        return Usage(
            input_tokens=estimate_tokens(rest),
            output_tokens=output_tokens,
            cache_creation_input_tokens=0 if seen else cached,
            cache_read_input_tokens=cached if seen else 0,
        )

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_test{next(self._ids):06d}"

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _track(self, conn: socket.socket, *, active: bool) -> None:
        with self._lock:
            if active:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    api: MessagesAPIServer


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's httpx client expects
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.api._track(self.connection, active=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.api._track(self.connection, active=False)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: tests assert on recorded requests, not on stderr."""

    # --- dispatch ------------------------------------------------------------------------

    def do_POST(self) -> None:
        api = self.server.api
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = self.path.split("?", 1)[0]
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        api._record(RecordedRequest("POST", path, headers, body, raw))

        if not isinstance(body, dict):
            self._send_error(ErrorReply(400, "the request body is not a JSON object"))
            return
        request = MessagesRequest(path, body, headers)
        if path == MESSAGES_PATH:
            self._messages(api, request)
        elif path == BATCHES_PATH:
            self._create_batch(api, request)
        elif path == COUNT_TOKENS_PATH and api.count_tokens_enabled:
            self._send_json(200, {"input_tokens": api.count_tokens(request)})
        else:
            self._send_error(ErrorReply(404, f"no route for POST {path}"))

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        api = self.server.api
        api._record(RecordedRequest("GET", path, headers, None, b""))
        parts = path.removeprefix(BATCHES_PATH + "/").split("/")
        batch = api.batches.get(parts[0]) if path.startswith(BATCHES_PATH + "/") else None
        if batch is None:
            self._send_error(ErrorReply(404, f"no route for GET {path}"))
        elif len(parts) == 1:
            with api._lock:
                batch.retrieves += 1
            self._send_json(200, batch.as_json(api.base_url, api.batch_polls))
        elif parts[1:] == ["results"] and batch.ended(api.batch_polls):
            data = "".join(json.dumps(line) + "\n" for line in batch.results).encode()
            self.send_response(200)
            self.send_header("content-type", "application/binary")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        else:
            self._send_error(ErrorReply(404, f"batch {batch.id} has no results yet"))

    def _create_batch(self, api: MessagesAPIServer, request: MessagesRequest) -> None:
        entries = request.body.get("requests")
        if not isinstance(entries, list) or not entries:
            self._send_error(ErrorReply(400, "requests: Field required"))
            return
        results = []
        for entry in entries:
            custom_id = entry["custom_id"]
            params = MessagesRequest(MESSAGES_PATH, entry["params"], request.headers)
            outcome = api.batch_outcome(custom_id, params)
            result: dict[str, Any] = {"type": outcome}
            if outcome == "succeeded":
                reply = api._next_result(params)
                reply = Reply.text(reply) if isinstance(reply, str) else reply
                if isinstance(reply, ErrorReply):
                    result = {"type": "errored", "error": reply.body()}
                else:
                    result["message"] = _message_json(api, params, reply)
            elif outcome == "errored":
                result["error"] = ErrorReply(
                    400, "batch request rejected by the test server"
                ).body()
            results.append({"custom_id": custom_id, "result": result})
        batch = Batch(api._new_id("msgbatch"), results)
        with api._lock:
            api.batches[batch.id] = batch
        self._send_json(200, batch.as_json(api.base_url, api.batch_polls))

    def _messages(self, api: MessagesAPIServer, request: MessagesRequest) -> None:
        if api.strict:
            missing = [k for k in ("model", "max_tokens", "messages") if k not in request.body]
            if missing:
                self._send_error(ErrorReply(400, f"{missing[0]}: Field required"))
                return
        try:
            result = api._next_result(request)
        except Exception as error:  # a failing handler becomes a visible 500
            result = ErrorReply(500, f"test handler raised {type(error).__name__}: {error}")
        if isinstance(result, str):
            result = Reply.text(result)
        api._wait(result.delay)
        if isinstance(result, ErrorReply):
            self._send_error(result)
            return
        message = _message_json(api, request, result)
        if request.stream:
            self._send_stream(api, message, result)
        else:
            self._send_json(200, message, result.headers)

    # --- writers -------------------------------------------------------------------------

    def _send_json(
        self, status: int, payload: Any, extra_headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", self.server.api._new_id("req"))
        for name, value in (extra_headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error(self, error: ErrorReply) -> None:
        self._send_json(error.status, error.body(), error.response_headers())

    def _send_stream(self, api: MessagesAPIServer, message: dict[str, Any], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", api._new_id("req"))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        for index, (event, data) in enumerate(_stream_events(message, reply)):
            if index and reply.event_delay:
                api._wait(reply.event_delay)
            chunk = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


# --- message construction --------------------------------------------------------------


def _message_json(api: MessagesAPIServer, request: MessagesRequest, reply: Reply) -> dict[str, Any]:
    content = [
        block.as_json(api._new_id("toolu")) if isinstance(block, ToolUseBlock) else block.as_json()
        for block in reply.content
    ]
    stop_reason = reply.stop_reason or (
        "tool_use" if any(isinstance(b, ToolUseBlock) for b in reply.content) else "end_turn"
    )
    usage = reply.usage or api.default_usage(
        request,
        estimate_tokens(
            "".join(
                b.text if isinstance(b, TextBlock) else json.dumps(dict(b.input))
                for b in reply.content
            )
        ),
    )
    return {
        "id": api._new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": reply.model or request.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": reply.stop_sequence,
        "usage": usage.as_json(),
    }


def _stream_events(message: dict[str, Any], reply: Reply) -> Iterator[tuple[str, Any]]:
    """The SSE events of the real API for a finished message."""
    usage = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "text": ""},
                },
            )
            for piece in _split(block["text"]):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
        else:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                },
            )
            for piece in _split(json.dumps(block["input"]), size=8):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    if reply.stream_error is not None:
        yield "error", reply.stream_error.body()
        return
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": message["stop_sequence"],
            },
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _cache_split(body: Mapping[str, Any]) -> tuple[str, str]:
    """The request's text up to and including its last ``cache_control`` block, and the
    rest, in the API's prefix order: tools, system, messages."""
    blocks: list[tuple[str, bool]] = [
        (json.dumps(tool, sort_keys=True), "cache_control" in tool)
        for tool in body.get("tools", [])
        if isinstance(tool, dict)
    ]
    system = body.get("system", "")
    if isinstance(system, str):
        blocks.append((system, False))
    elif isinstance(system, list):
        blocks += _marked(system)
    for message in body.get("messages", []):
        content = message.get("content", "") if isinstance(message, dict) else ""
        if isinstance(content, str):
            blocks.append((content, False))
        elif isinstance(content, list):
            blocks += [
                (_text_of([b]), "cache_control" in b) for b in content if isinstance(b, dict)
            ]
    marked = [i for i, (_, cached) in enumerate(blocks) if cached]
    if not marked:
        return "", ""
    end = marked[-1] + 1
    return "\n".join(t for t, _ in blocks[:end]), "\n".join(t for t, _ in blocks[end:])


def _marked(blocks: list[Any]) -> list[tuple[str, bool]]:
    return [(_text_of([b]), "cache_control" in b) for b in blocks if isinstance(b, dict)]


def _split(text: str, size: int = 12) -> list[str]:
    """Deltas of at most ``size`` characters (at least one, possibly empty, like the API)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""


def _api_key(headers: Mapping[str, str]) -> str | None:
    if "x-api-key" in headers:
        return headers["x-api-key"]
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def _format_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


@pytest.fixture
def messages_api() -> Iterator[MessagesAPIServer]:
    """A started `MessagesAPIServer` answering ``"ok"``; set ``.handler`` or `enqueue`."""
    with MessagesAPIServer() as server:
        yield server
