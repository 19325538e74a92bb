"""The recording proxy for the Anthropic Messages API.

Point `ANTHROPIC_BASE_URL` at the gateway: `POST /v1/messages` is forwarded to the configured
upstream (`evalstream.connectors.gateway.upstream`) and the answer passed back unchanged (status,
headers, body); a streamed answer is passed through chunk by chunk as it arrives. Each call
is then recorded, off the response path, as `provider:start` / `provider:end` (model, usage,
cost, duration, stop reason) or `provider:error`, plus one `tool:call` per `tool_use` block,
in the episode named by `X-Evalstream-Episode` (else a session header, else a new episode
per call). The recordings of the calls that end within `RECORD_FLUSH_S` are published
together.

The client's credentials (`x-api-key`, `Authorization`) are forwarded upstream and never
recorded or logged; the gateway's own token travels in `X-Evalstream-Token`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from starlette.background import BackgroundTask
from starlette.responses import Response, StreamingResponse

from evalstream.assertions.errors import SignalDecodeError
from evalstream.assertions.wire.limits import check_text
from evalstream.assertions.wire.pricing import PricingTable, Usage
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.gateway.ingest import Encoder, wire_records
from evalstream.connectors.gateway.messages import (
    MessageAccumulator,
    MessageSummary,
    summarize_message,
)
from evalstream.connectors.gateway.metrics import GatewayMetrics
from evalstream.connectors.gateway.publisher import OutRecord, Publisher
from evalstream.connectors.gateway.tenancy import Caller
from evalstream.connectors.gateway.upstream import (
    Upstream,
    UpstreamError,
    UpstreamResponse,
    upstream_for,
)

JSON = Any
log = logging.getLogger("evalstream.gateway")

EPISODE_HEADER = "x-evalstream-episode"
SESSION_HEADERS = ("x-evalstream-session", "x-claude-code-session-id", "x-session-id")
AGENT_HEADER = "x-evalstream-agent"
RECORD_FLUSH_S = 0.05  # recordings of the calls within this window go out in one publish
# Never forwarded upstream: connection-level headers and the gateway's own.
DROP_REQUEST = frozenset(
    name.encode("latin-1")
    for name in (
        "host",
        "connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "accept-encoding",
        "x-evalstream-token",
        EPISODE_HEADER,
        AGENT_HEADER,
        "x-evalstream-session",
    )
)
DROP_RESPONSE = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "content-encoding",
        "upgrade",
        "trailer",
    }
)


@dataclass(frozen=True, slots=True)
class CallContext:
    """One proxied call: who, which episode, and when it started."""

    call_id: str
    caller: Caller
    episode_id: str
    agent: str | None
    started_ms: float
    started_monotonic: float
    request: dict[str, JSON]
    streamed: bool


def episode_from_headers(headers: Any) -> str:
    explicit = headers.get(EPISODE_HEADER)
    if explicit:
        return str(explicit)
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if value:
            return str(value)
    return f"px-{uuid.uuid4().hex}"


def invalid_call(ctx: CallContext) -> SignalDecodeError | None:
    """Why the call's episode or agent header cannot name a signal (None: they can). Checked
    before the call is forwarded: a consumer would dead-letter its records, losing the call."""
    scoped = ctx.caller.episode(ctx.episode_id)
    named = (
        (scoped, f"`{EPISODE_HEADER}` (the episode id, with any tenant prefix)"),
        (ctx.agent, f"`{AGENT_HEADER}`"),
    )
    for value, what in named:
        if value is not None:
            try:
                check_text(value, what)
            except SignalDecodeError as exc:
                return exc
    return None


def _anthropic_error(status: int, kind: str, message: str) -> Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Response(orjson.dumps(body), status, media_type="application/json")


class AnthropicProxy:
    def __init__(
        self,
        upstream: str,
        publisher: Publisher,
        encoder: Encoder,
        metrics: GatewayMetrics,
        pricing: PricingTable,
        *,
        timeout_s: float = 600.0,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.publisher = publisher
        self.encoder = encoder
        self.metrics = metrics
        self.pricing = pricing
        self.clock = clock
        self.upstream: Upstream = upstream_for(upstream, timeout_s=timeout_s, transport=transport)
        self.recordings: set[asyncio.Task[None]] = set()
        self._unpublished: list[OutRecord] = []
        self._flush_handle: asyncio.TimerHandle | None = None

    async def close(self) -> None:
        self._flush()
        if self.recordings:
            await asyncio.gather(*self.recordings, return_exceptions=True)
        await self.upstream.aclose()

    async def _send(
        self, path: str, query: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse:
        forwarded = [(k, v) for k, v in headers if k.lower() not in DROP_REQUEST]
        forwarded.append((b"accept-encoding", b"identity"))  # the recorder reads the bytes
        return await self.upstream.send(path, query, forwarded, body)

    async def forward_plain(
        self, path: str, query: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes
    ) -> Response:
        """Forward without recording (e.g. count_tokens)."""
        try:
            response = await self._send(path, query, headers, body)
            try:
                content = await response.read()
            finally:
                await response.aclose()
        except UpstreamError as exc:
            return _anthropic_error(502, "api_error", f"upstream unreachable: {exc.kind}")
        return Response(content, response.status, _response_headers(response.headers))

    async def messages(
        self,
        ctx: CallContext,
        path: str,
        query: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
    ) -> Response:
        invalid = invalid_call(ctx)
        if invalid is not None:  # Anthropic's error shape, so the SDK raises BadRequestError
            self.metrics.rejections.labels(path, invalid.reason).inc()
            return _anthropic_error(400, "invalid_request_error", invalid.message)
        try:
            upstream = await self._send(path, query, headers, body)
        except UpstreamError as exc:
            message = f"upstream unreachable: {exc.kind}"
            self._record(ctx, None, {"code": "upstream_unreachable", "message": message})
            self.metrics.proxy_calls.labels("unreachable", str(ctx.streamed).lower()).inc()
            return _anthropic_error(502, "api_error", message)
        out_headers = _response_headers(upstream.headers)
        out_headers[EPISODE_HEADER] = ctx.caller.episode(ctx.episode_id)
        content_type = upstream.header("content-type") or ""
        if upstream.status == 200 and content_type.startswith("text/event-stream"):
            return StreamingResponse(
                self._relay(ctx, upstream),
                status_code=upstream.status,
                headers=out_headers,
            )
        try:
            content = await upstream.read()
        except UpstreamError as exc:
            message = f"upstream failed mid-response: {exc.kind}"
            self._record(ctx, None, {"code": "upstream_unreachable", "message": message})
            return _anthropic_error(502, "api_error", message)
        finally:
            await upstream.aclose()
        summary: MessageSummary | None = None
        failure: dict[str, JSON] | None = None
        if 200 <= upstream.status < 300:
            try:
                summary = summarize_message(orjson.loads(content))
            except orjson.JSONDecodeError:
                summary = MessageSummary()
        else:
            failure = _error_of(upstream.status, content)
        outcome = "ok" if failure is None else "upstream_error"
        self.metrics.proxy_calls.labels(outcome, "false").inc()
        # Recorded after the answer went out: the recording costs the caller no latency.
        return Response(
            content,
            upstream.status,
            out_headers,
            background=BackgroundTask(self._after, ctx, summary, failure),
        )

    async def _after(
        self, ctx: CallContext, summary: MessageSummary | None, failure: dict[str, JSON] | None
    ) -> None:
        self.metrics.proxy_upstream_latency.observe(time.monotonic() - ctx.started_monotonic)
        self._record(ctx, summary, failure)

    async def _relay(self, ctx: CallContext, upstream: UpstreamResponse) -> AsyncIterator[bytes]:
        accumulator = MessageAccumulator()
        failure: dict[str, JSON] | None = None
        try:
            async for chunk in upstream.chunks():
                yield chunk  # first to the client, then to the recorder
                accumulator.feed(chunk)
        except UpstreamError as exc:
            failure = {"code": "upstream_interrupted", "message": exc.kind}
        finally:
            await upstream.aclose()
            summary = accumulator.finish()
            if failure is None and summary.error is not None:
                failure = {
                    "code": summary.error.get("type", "stream_error"),
                    "message": summary.error.get("message"),
                }
            if failure is None and not summary.complete:
                failure = {"code": "incomplete_stream", "message": "the stream ended early"}
            self._record(ctx, summary if failure is None else None, failure)
            outcome = "ok" if failure is None else "upstream_error"
            self.metrics.proxy_calls.labels(outcome, "true").inc()
            self.metrics.proxy_upstream_latency.observe(time.monotonic() - ctx.started_monotonic)

    # --- recording ---------------------------------------------------------------------------

    def _record(
        self, ctx: CallContext, summary: MessageSummary | None, failure: dict[str, JSON] | None
    ) -> None:
        try:
            signals = self.call_signals(ctx, summary, failure)
            records = wire_records(signals, ctx.caller, self.encoder)
        except Exception:  # a recording that cannot be built must not break the call
            self.metrics.proxy_record_failures.inc()
            log.warning("could not build the recording of a proxied call", exc_info=True)
            return
        # Published together with the other calls of the next few milliseconds: one Kafka
        # publish per call would cost each call more CPU than its proxying.
        self._unpublished.extend(records)
        if self._flush_handle is None:
            loop = asyncio.get_running_loop()
            self._flush_handle = loop.call_later(RECORD_FLUSH_S, self._flush)

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if not self._unpublished:
            return
        records, self._unpublished = self._unpublished, []
        task = asyncio.create_task(self._publish(records))
        self.recordings.add(task)
        task.add_done_callback(self.recordings.discard)

    async def _publish(self, records: list[OutRecord]) -> None:
        try:
            await self.publisher.publish(records)
        except Exception:  # a lost recording must never break the proxied call
            self.metrics.proxy_record_failures.inc()
            log.warning("could not publish the recording of a proxied call", exc_info=True)

    def call_signals(
        self, ctx: CallContext, summary: MessageSummary | None, failure: dict[str, JSON] | None
    ) -> list[Signal]:
        duration_ms = (time.monotonic() - ctx.started_monotonic) * 1000.0
        end_ms = ctx.started_ms + duration_ms
        req = ctx.request
        tools = req.get("tools")
        model = req.get("model") if isinstance(req.get("model"), str) else None
        start = Signal(
            f"{ctx.call_id}:start",
            ctx.episode_id,
            "provider:start",
            ctx.started_ms,
            ctx.started_ms,
            agent=ctx.agent,
            provider="anthropic",
            payload={
                "model": model,
                "provider": "anthropic",
                "input": {
                    "messages": len(req["messages"])
                    if isinstance(req.get("messages"), list)
                    else 0,
                    "tools": [t.get("name") for t in tools if isinstance(t, dict)]
                    if isinstance(tools, list)
                    else [],
                    "maxTokens": req.get("max_tokens"),
                    "stream": ctx.streamed,
                },
            },
        )
        if summary is None:
            error = dict(failure or {})
            error["durationMs"] = duration_ms
            error.setdefault("error", error.get("message"))
            end = Signal(
                f"{ctx.call_id}:end",
                ctx.episode_id,
                "provider:error",
                end_ms,
                end_ms,
                agent=ctx.agent,
                parent=start.id,
                provider="anthropic",
                payload=error,
            )
            return [start, end]
        usage = summary.usage
        inp, out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
        cache_read = usage.get("cache_read_input_tokens", 0)
        cache_write = usage.get("cache_creation_input_tokens", 0)
        used_model = summary.model or model
        cost = self.pricing.cost(used_model, Usage(inp, out, inp + out, cache_read, cache_write))
        payload: dict[str, JSON] = {
            "output": {
                "content": summary.text,
                "toolCalls": summary.tool_calls,
                "usage": {
                    "inputTokens": inp,
                    "outputTokens": out,
                    "totalTokens": inp + out,
                    "cacheReadInputTokens": cache_read,
                    "cacheCreationInputTokens": cache_write,
                },
            },
            "durationMs": duration_ms,
            "model": used_model,
            "stopReason": summary.stop_reason,
            "messageId": summary.message_id,
        }
        if cost is not None:
            payload["costUsd"] = round(cost, 10)
        end = Signal(
            f"{ctx.call_id}:end",
            ctx.episode_id,
            "provider:end",
            end_ms,
            end_ms,
            agent=ctx.agent,
            parent=start.id,
            provider="anthropic",
            payload=payload,
        )
        calls = [
            Signal(
                f"{ctx.call_id}:tool:{call.get('id') or n}",
                ctx.episode_id,
                "tool:call",
                end_ms,
                end_ms,
                agent=ctx.agent,
                parent=end.id,
                payload=call,
            )
            for n, call in enumerate(summary.tool_calls)
        ]
        return [start, end, *calls]


def _response_headers(headers: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """The upstream's headers minus the connection-level ones; lower-case names, repeated
    headers joined with ", " (as httpx's `Headers.items()` did)."""
    out: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name in DROP_RESPONSE:
            continue
        value = raw_value.decode("latin-1")
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def _error_of(status: int, content: bytes) -> dict[str, JSON]:
    kind: JSON = None
    message: JSON = None
    try:
        body = orjson.loads(content)
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            kind, message = error.get("type"), error.get("message")
    except orjson.JSONDecodeError:
        message = content[:200].decode("utf-8", "replace")
    return {"code": kind or f"http_{status}", "status": status, "message": message}
