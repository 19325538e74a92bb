"""Record an agent's Claude calls as signals without changing its code.

The anthropic SDK (2.x) sends every request through an `httpx2` transport. `RecordingTransport`
wraps one: each `POST …/v1/messages` becomes `provider:start` {model, provider, input} before
the request and `provider:end` {model, output: {content, toolCalls, usage}, durationMs,
stopReason} after the response (streamed responses are read as they pass through and
recorded when the stream closes), or `provider:error` {error, code} when the call fails.
Other requests pass through untouched.

Two ways in:

    client = anthropic.Anthropic(http_client=recording_client())     # explicit
    with instrument_anthropic():                                      # no code change:
        agent_that_builds_its_own_client()                           # clients built without
                                                                      # http_client record
Signals go to the recorder of the running case (`current_recorder()`), or to the one given;
with neither, nothing is recorded.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2
import orjson

from evalstream.connectors.targets.recorder import Recorder, current_recorder

JSON = Any
PROVIDER = "anthropic"


def _is_messages_call(request: httpx2.Request) -> bool:
    return request.method == "POST" and request.url.path.rstrip("/").endswith("/v1/messages")


class _Call:
    """One Messages API call being recorded."""

    def __init__(self, recorder: Recorder, request: httpx2.Request, agent: str | None) -> None:
        self.recorder = recorder
        self.agent = agent
        try:
            body = orjson.loads(request.read() or b"{}")
        except orjson.JSONDecodeError:
            body = {}
        self.model = body.get("model") if isinstance(body, dict) else None
        self.streaming = bool(isinstance(body, dict) and body.get("stream"))
        recorded_input: dict[str, JSON] = {"messages": body.get("messages")}
        if body.get("system") is not None:
            recorded_input["system"] = body.get("system")
        if body.get("tools"):
            recorded_input["tools"] = [t.get("name") for t in body["tools"] if isinstance(t, dict)]
        self.started = recorder.clock()
        self.start_id = recorder.emit(
            "provider:start",
            {"model": self.model, "provider": PROVIDER, "input": recorded_input},
            agent=agent,
            provider=PROVIDER,
        )
        self.done = False

    def error(self, message: str, code: int | str | None) -> None:
        if self.done:
            return
        self.done = True
        self.recorder.emit(
            "provider:error",
            {"error": message, "code": code, "model": self.model, "agent": self.agent},
            agent=self.agent,
            parent=self.start_id,
            provider=PROVIDER,
        )

    def finish(self, message: dict[str, JSON]) -> None:
        """Record `provider:end` from a Messages API message (as JSON)."""
        if self.done:
            return
        self.done = True
        text: list[str] = []
        tool_calls: list[JSON] = []
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                tool_calls.append(
                    {"id": block.get("id"), "name": block.get("name"), "input": block.get("input")}
                )
        usage = message.get("usage") or {}
        inp = int(usage.get("input_tokens") or 0)
        out = int(usage.get("output_tokens") or 0)
        self.recorder.emit(
            "provider:end",
            {
                "model": message.get("model") or self.model,
                "output": {
                    "content": "".join(text),
                    "toolCalls": tool_calls,
                    "usage": {
                        "inputTokens": inp,
                        "outputTokens": out,
                        "totalTokens": inp + out,
                        "cacheReadInputTokens": int(usage.get("cache_read_input_tokens") or 0),
                        "cacheCreationInputTokens": int(
                            usage.get("cache_creation_input_tokens") or 0
                        ),
                    },
                },
                "durationMs": max(0.0, self.recorder.clock() - self.started),
                "stopReason": message.get("stop_reason"),
            },
            agent=self.agent,
            parent=self.start_id,
            provider=PROVIDER,
        )

    def finish_body(self, body: bytes) -> None:
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            self.error(f"response is not JSON: {exc}", None)
            return
        if isinstance(message, dict):
            self.finish(message)

    def finish_stream(self, raw: bytes) -> None:
        message = _assemble_sse(raw)
        if "error" in message:
            self.error(str(message["error"]), "stream_error")
        else:
            self.finish(message)


def _assemble_sse(raw: bytes) -> dict[str, JSON]:
    """Rebuild the final message from a Messages API event stream."""
    message: dict[str, JSON] = {"content": [], "usage": {}}
    partial_json: dict[int, str] = {}
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = b"".join(
            line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:")
        )
        if not data:
            continue
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        kind = event.get("type")
        if kind == "message_start":
            start = event.get("message") or {}
            message["model"] = start.get("model")
            message["usage"] = dict(start.get("usage") or {})
        elif kind == "content_block_start":
            message["content"].append(dict(event.get("content_block") or {}))
        elif kind == "content_block_delta" and message["content"]:
            index = int(event.get("index", len(message["content"]) - 1))
            target = message["content"][min(index, len(message["content"]) - 1)]
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                target["text"] = target.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                partial_json[index] = partial_json.get(index, "") + delta.get("partial_json", "")
        elif kind == "message_delta":
            message["usage"].update(event.get("usage") or {})
            message["stop_reason"] = (event.get("delta") or {}).get("stop_reason")
        elif kind == "error":
            message["error"] = event.get("error")
    for index, text in partial_json.items():
        try:
            message["content"][index]["input"] = orjson.loads(text) if text else {}
        except (orjson.JSONDecodeError, IndexError):
            continue
    return message


class _TeeStream(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, on_close: Callable[[bytes], None]) -> None:
        self.inner = inner
        self.on_close = on_close
        self.buffer = bytearray()

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self.buffer.extend(chunk)
            yield chunk

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.on_close(bytes(self.buffer))


class _AsyncTeeStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, on_close: Callable[[bytes], None]) -> None:
        self.inner = inner
        self.on_close = on_close
        self.buffer = bytearray()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.buffer.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            self.on_close(bytes(self.buffer))


def _plain_headers(response: httpx2.Response) -> list[tuple[str, str]]:
    return [
        (k, v)
        for k, v in response.headers.multi_items()
        if k.lower() not in {"content-encoding", "content-length", "transfer-encoding"}
    ]


class RecordingTransport(httpx2.BaseTransport):
    def __init__(
        self,
        inner: httpx2.BaseTransport | None = None,
        *,
        recorder: Recorder | None = None,
        agent: str | None = None,
    ) -> None:
        self.inner = inner or httpx2.HTTPTransport()
        self.recorder = recorder
        self.agent = agent

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        recorder = self.recorder or current_recorder()
        if recorder is None or not _is_messages_call(request):
            return self.inner.handle_request(request)
        request.headers["Accept-Encoding"] = "identity"  # read the stream as it passes
        call = _Call(recorder, request, self.agent)
        try:
            response = self.inner.handle_request(request)
        except Exception as exc:
            call.error(f"{type(exc).__name__}: {exc}", "transport")
            raise
        if response.status_code >= 400 or not call.streaming:
            body = response.read()
            response.close()
            return _buffered(call, request, response, body)
        assert isinstance(response.stream, httpx2.SyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_TeeStream(response.stream, call.finish_stream),
            request=request,
            extensions=response.extensions,
        )

    def close(self) -> None:
        self.inner.close()


def _buffered(
    call: _Call, request: httpx2.Request, response: httpx2.Response, body: bytes
) -> httpx2.Response:
    """Records a whole (error or non-streamed) answer and hands the client a copy of it."""
    if response.status_code >= 400:
        call.error(body[:500].decode("utf-8", "replace"), response.status_code)
    else:
        call.finish_body(body)
    return httpx2.Response(
        response.status_code,
        headers=_plain_headers(response),
        content=body,
        request=request,
        extensions=response.extensions,
    )


class AsyncRecordingTransport(httpx2.AsyncBaseTransport):
    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport | None = None,
        *,
        recorder: Recorder | None = None,
        agent: str | None = None,
    ) -> None:
        self.inner = inner or httpx2.AsyncHTTPTransport()
        self.recorder = recorder
        self.agent = agent

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        recorder = self.recorder or current_recorder()
        if recorder is None or not _is_messages_call(request):
            return await self.inner.handle_async_request(request)
        request.headers["Accept-Encoding"] = "identity"
        call = _Call(recorder, request, self.agent)
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as exc:
            call.error(f"{type(exc).__name__}: {exc}", "transport")
            raise
        if response.status_code >= 400 or not call.streaming:
            body = await response.aread()
            await response.aclose()
            return _buffered(call, request, response, body)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_AsyncTeeStream(response.stream, call.finish_stream),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def recording_client(recorder: Recorder | None = None, agent: str | None = None) -> httpx2.Client:
    """An `http_client` for `anthropic.Anthropic` that records its Messages API calls."""
    return anthropic.DefaultHttpxClient(
        transport=RecordingTransport(recorder=recorder, agent=agent)
    )


def async_recording_client(
    recorder: Recorder | None = None, agent: str | None = None
) -> httpx2.AsyncClient:
    """An `http_client` for `anthropic.AsyncAnthropic` that records its calls."""
    return anthropic.DefaultAsyncHttpxClient(
        transport=AsyncRecordingTransport(recorder=recorder, agent=agent)
    )


_lock = threading.Lock()
_installed = 0
_originals: dict[type[Any], Callable[..., None]] = {}


def _patched(cls: type[Any], factory: Callable[[], Any]) -> Callable[..., None]:
    original = cls.__init__

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("http_client") is None:
            kwargs["http_client"] = factory()
        original(self, *args, **kwargs)

    _originals[cls] = original
    return init


@contextmanager
def instrument_anthropic() -> Iterator[None]:
    """While active, `anthropic.Anthropic()` / `AsyncAnthropic()` built without an
    `http_client` record their calls into the current case's recorder. Re-entrant."""
    global _installed  # noqa: PLW0603 - one process-wide patch, reference-counted
    with _lock:
        if _installed == 0:
            anthropic.Anthropic.__init__ = _patched(anthropic.Anthropic, recording_client)  # type: ignore[method-assign]
            anthropic.AsyncAnthropic.__init__ = _patched(  # type: ignore[method-assign]
                anthropic.AsyncAnthropic, async_recording_client
            )
        _installed += 1
    try:
        yield
    finally:
        with _lock:
            _installed -= 1
            if _installed == 0:
                for cls, original in _originals.items():
                    cls.__init__ = original
                _originals.clear()
