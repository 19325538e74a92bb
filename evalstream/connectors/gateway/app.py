"""The gateway HTTP service (FastAPI on uvicorn): `create_gateway_app(settings, publisher)`.

Every ingest endpoint does the same steps, in this order, and answers 2xx only at the end:
authenticate (401) -> read the body within the size limit (413) -> decode (400/415) ->
check items, depth and string lengths (413/422) -> validate every record (422) -> stamp the
tenant and redact secrets -> publish and wait for the acknowledgement (503 + Retry-After).
Nothing is published for a refused request.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
from fastapi import FastAPI, Request
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from evalstream.assertions.errors import InputError, SignalDecodeError
from evalstream.assertions.wire.pricing import PricingTable, default_pricing, load_pricing
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.codecs.otlp_decode import ValueLimits
from evalstream.connectors.codecs.otlp_genai import otlp_signals, span_count
from evalstream.connectors.codecs.store_episodes import episode_to_signals
from evalstream.connectors.gateway import openapi
from evalstream.connectors.gateway.auth import TokenStore
from evalstream.connectors.gateway.errors import Rejected, Unavailable
from evalstream.connectors.gateway.ingest import (
    Encoder,
    converted_records,
    episode_ids,
    litellm_records,
    llm_call_records,
    signal_records,
    wire_records,
)
from evalstream.connectors.gateway.limits import (
    Limits,
    decode_content,
    json_items,
    media_type,
    read_body,
)
from evalstream.connectors.gateway.metrics import GatewayMetrics
from evalstream.connectors.gateway.proxy import (
    AGENT_HEADER,
    EPISODE_HEADER,
    SESSION_HEADERS,
    AnthropicProxy,
    CallContext,
    episode_from_headers,
)
from evalstream.connectors.gateway.publisher import OutRecord, Publisher
from evalstream.connectors.gateway.redaction import Redactor
from evalstream.connectors.gateway.settings import GatewaySettings
from evalstream.connectors.gateway.tenancy import Caller

JSON = Any
PROTOBUF_TYPES = frozenset({"application/x-protobuf", "application/protobuf"})
EpisodeCodec = Callable[[JSON], list[Signal]]


def _json(body: JSON, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


class RequestMetrics:
    """Counts every request by route template and status (a plain ASGI middleware, so it
    neither buffers nor delays streamed responses)."""

    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            self.metrics.requests.labels(endpoint_of(scope), str(status[0])).inc()


def endpoint_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    hot = scope.get(HOT_ROUTE)
    return hot if isinstance(hot, str) else "unmatched"


HOT_ROUTE = "evalstream.hot_route"
Handler = Callable[[Request], Awaitable[Response]]


class GatewayApp(FastAPI):
    """FastAPI, with the busy endpoints (ingest, OTLP, the proxy) served straight by their
    handlers instead of through FastAPI's per-request layers (middleware stack, routing,
    dependency solving, telemetry): the same handler, the same error answers and metrics, a
    tenth less CPU per request. Their routes stay registered with FastAPI too, so the OpenAPI
    description, other methods (405) and every other path are unchanged."""

    hot_routes: dict[str, Handler]
    gateway_metrics: GatewayMetrics
    retry_after_s: int

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            handler = self.hot_routes.get(scope["path"])
            if handler is not None:
                await self._serve_hot(handler, scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    async def _serve_hot(
        self, handler: Handler, scope: Scope, receive: Receive, send: Send
    ) -> None:
        scope["app"] = self
        endpoint = scope[HOT_ROUTE] = scope["path"]
        status = 500
        try:
            try:
                response = await handler(Request(scope, receive))
            except Rejected as exc:
                response = rejected_response(self.gateway_metrics, endpoint, exc)
            except Unavailable as exc:
                response = unavailable_response(
                    self.gateway_metrics, endpoint, exc, self.retry_after_s
                )
            except Exception:
                # As Starlette's ServerErrorMiddleware: a plain 500, then let the server log it.
                await PlainTextResponse("Internal Server Error", 500)(scope, receive, send)
                raise
            status = response.status_code
            await response(scope, receive, send)
        finally:
            self.gateway_metrics.requests.labels(endpoint, str(status)).inc()


def rejected_response(metrics: GatewayMetrics, endpoint: str, exc: Rejected) -> Response:
    metrics.rejections.labels(endpoint, exc.code).inc()
    return _json(exc.body(), exc.status, exc.headers)


def unavailable_response(
    metrics: GatewayMetrics, endpoint: str, exc: Unavailable, retry_after_s: int
) -> Response:
    metrics.rejections.labels(endpoint, exc.code).inc()
    body = {"error": {"code": exc.code, "message": exc.message}}
    return _json(body, 503, {"Retry-After": str(retry_after_s)})


def hot_post(app: GatewayApp, path: str, **route: Any) -> Callable[[Handler], Handler]:
    """`@app.post(path, **route)` that also serves the path on the hot path."""

    def register(handler: Handler) -> Handler:
        app.hot_routes[path] = handler
        return app.post(path, **route)(handler)

    return register


def _ingest_post(
    app: GatewayApp, path: str, summary: str, item: dict[str, JSON]
) -> Callable[[Handler], Handler]:
    """A hot ingest route: items of this schema as JSON or NDJSON, answered 202."""
    return hot_post(
        app,
        path,
        summary=summary,
        openapi_extra=openapi.json_or_ndjson(item),
        responses=openapi.accepted_response(),
        status_code=202,
    )


class Gateway:
    """The request handling shared by the routes (auth, bodies, publishing)."""

    def __init__(
        self,
        settings: GatewaySettings,
        publisher: Publisher,
        tokens: TokenStore,
        metrics: GatewayMetrics,
    ) -> None:
        self.settings = settings
        self.publisher = publisher
        self.tokens = tokens
        self.metrics = metrics
        self.limits = Limits(
            settings.max_body_bytes,
            settings.max_signals,
            settings.max_depth,
            settings.max_string_length,
        )
        self.value_limits = ValueLimits(settings.max_depth, settings.max_string_length)
        self.redactor = Redactor() if settings.redact else None
        self.encoder = Encoder(self.redactor)

    def caller(self, request: Request, *, proxy: bool = False) -> Caller:
        token = request.headers.get("x-evalstream-token")
        if token is None and not proxy:
            scheme, _, value = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() == "bearer" and value.strip():
                token = value.strip()
        if not len(self.tokens):
            return Caller(None)  # allow_anonymous: no tenant
        challenge = {"WWW-Authenticate": 'Bearer realm="evalstream"'}
        where = "X-Evalstream-Token" if proxy else "Authorization: Bearer (or X-Evalstream-Token)"
        if not token:
            raise Rejected(
                401, "missing_token", f"send the gateway token in {where}", headers=challenge
            )
        tenant = self.tokens.tenant_for(token)
        if tenant is None:
            raise Rejected(
                401, "invalid_token", "the gateway token is not known", headers=challenge
            )
        return Caller(tenant)

    async def raw_body(self, request: Request) -> bytes:
        body = await read_body(request.stream(), request.headers.get("content-length"), self.limits)
        self.metrics.request_bytes.labels(endpoint_of(request.scope)).inc(len(body))
        return body

    async def body(self, request: Request) -> bytes:
        raw = await self.raw_body(request)
        return decode_content(raw, request.headers.get("content-encoding"), self.limits)

    async def items(self, request: Request) -> list[JSON]:
        return json_items(
            await self.body(request), request.headers.get("content-type"), self.limits
        )

    async def publish(self, records: list[OutRecord]) -> None:
        if self.redactor is not None:
            for kind, count in self.redactor.take_counts().items():
                self.metrics.redactions.labels(kind).inc(count)
        if not records:
            return
        started = time.perf_counter()
        await self.publisher.publish(records)
        self.metrics.publish_latency.observe(time.perf_counter() - started)
        per_stream = Counter(r.stream for r in records)
        for stream, count in per_stream.items():
            self.metrics.published.labels(stream).inc(count)
        self.metrics.published_bytes.inc(sum(len(r.value) for r in records))

    async def accept(self, records: list[OutRecord]) -> Response:
        await self.publish(records)
        return _json({"accepted": len(records), "episode_ids": episode_ids(records)}, 202)


def header_episode(request: Request) -> str | None:
    for name in (EPISODE_HEADER, *SESSION_HEADERS):
        value = request.headers.get(name)
        if value:
            return value
    return None


def create_gateway_app(
    settings: GatewaySettings,
    publisher: Publisher,
    *,
    metrics: GatewayMetrics | None = None,
    tokens: TokenStore | None = None,
    pricing: PricingTable | None = None,
    upstream_transport: httpx.AsyncBaseTransport | None = None,
    episode_codec: EpisodeCodec | None = None,  # default: the episode-store shape
    manage_publisher: bool = True,
) -> GatewayApp:
    """The gateway app. `manage_publisher`: start/stop the publisher with the app."""
    store = tokens if tokens is not None else TokenStore.load(settings.tokens_file, settings.tokens)
    if not len(store) and not settings.allow_anonymous:
        raise InputError(
            "the gateway has no tokens: set tokens_file (EVALSTREAM_GATEWAY_TOKENS_FILE) or "
            "tokens (EVALSTREAM_GATEWAY_TOKENS=tenant:token), or allow_anonymous for local use"
        )
    if len(store) and settings.allow_anonymous:
        raise InputError(
            "allow_anonymous cannot be combined with tokens: anonymous writes could reach a "
            "tenant's episodes; drop one of them"
        )
    metrics = metrics or GatewayMetrics()
    gw = Gateway(settings, publisher, store, metrics)
    prices = pricing or (
        load_pricing(Path(settings.pricing)) if settings.pricing else default_pricing()
    )
    proxy = AnthropicProxy(
        settings.anthropic_upstream,
        publisher,
        gw.encoder,
        metrics,
        prices,
        timeout_s=settings.upstream_timeout_s,
        transport=upstream_transport,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if manage_publisher:
            await publisher.start()
        try:
            yield
        finally:
            await proxy.close()
            if manage_publisher:
                await publisher.stop()

    app = GatewayApp(
        title="evalstream gateway",
        version="1",
        description="Ingest API, OTLP GenAI traces and a recording proxy for the Anthropic "
        "Messages API. Every 2xx means the records were acknowledged by the broker.",
        lifespan=lifespan,
    )
    app.state.gateway = gw
    app.state.proxy = proxy
    app.hot_routes = {}
    app.gateway_metrics = metrics
    app.retry_after_s = settings.retry_after_s
    app.add_middleware(RequestMetrics, metrics=metrics)
    _add_error_handlers(app, metrics, settings.retry_after_s)
    _add_ingest_routes(app, gw, episode_codec)
    _add_otlp_route(app, gw)
    _add_proxy_routes(app, gw, proxy)
    _add_operations_routes(app, gw)
    return app


def _add_error_handlers(app: FastAPI, metrics: GatewayMetrics, retry_after_s: int) -> None:
    @app.exception_handler(Rejected)
    async def rejected(request: Request, exc: Rejected) -> Response:
        return rejected_response(metrics, endpoint_of(request.scope), exc)

    @app.exception_handler(Unavailable)
    async def unavailable(request: Request, exc: Unavailable) -> Response:
        return unavailable_response(metrics, endpoint_of(request.scope), exc, retry_after_s)


def _add_ingest_routes(app: GatewayApp, gw: Gateway, episode_codec: EpisodeCodec | None) -> None:
    codec: EpisodeCodec = episode_codec or episode_to_signals

    @_ingest_post(
        app, "/v1/signals", "Native signals (JSON array, one object, or NDJSON)", openapi.SIGNAL
    )
    async def post_signals(request: Request) -> Response:
        caller = gw.caller(request)
        items = await gw.items(request)
        return await gw.accept(signal_records(items, caller, gw.encoder, header_episode(request)))

    @_ingest_post(
        app, "/v1/llm-calls", "LLM-call records, native or the AIR shape", openapi.LLM_CALL
    )
    async def post_llm_calls(request: Request) -> Response:
        caller = gw.caller(request)
        items = await gw.items(request)
        records = llm_call_records(items, caller, gw.encoder, header_episode(request))
        return await gw.accept(records)

    @_ingest_post(
        app, "/v1/episodes", "Whole episodes in the episode-store shape", openapi.STORE_EPISODE
    )
    async def post_episodes(request: Request) -> Response:
        caller = gw.caller(request)
        items = await gw.items(request)
        fallback = header_episode(request)

        def convert(obj: JSON) -> list[Signal]:
            if fallback and isinstance(obj, dict) and not obj.get("episode_id"):
                obj = {**obj, "episode_id": fallback}
            return codec(obj)

        return await gw.accept(converted_records(items, convert, caller, gw.encoder, "episode"))

    @_ingest_post(
        app,
        "/v1/litellm",
        "LiteLLM generic_api logging payloads (StandardLoggingPayload)",
        openapi.LITELLM_PAYLOAD,
    )
    async def post_litellm(request: Request) -> Response:
        caller = gw.caller(request)
        items = await gw.items(request)
        return await gw.accept(litellm_records(items, caller, gw.encoder, header_episode(request)))


def _add_otlp_route(app: GatewayApp, gw: Gateway) -> None:
    @hot_post(
        app,
        "/v1/traces",
        summary="OTLP/HTTP traces (protobuf or JSON, gzip allowed), GenAI conventions",
        openapi_extra=openapi.OTLP_BODY,
        responses={
            200: {
                "description": "ExportTraceServiceResponse (in the request's encoding); every "
                "span was acknowledged.",
                "content": {
                    "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                    "application/json": {"schema": {"type": "object"}},
                },
            },
            **openapi.error_responses(*openapi.INGEST_ERRORS),
        },
    )
    async def post_traces(request: Request) -> Response:
        caller = gw.caller(request)
        kind = media_type(request.headers.get("content-type"))
        if kind not in PROTOBUF_TYPES and kind != "application/json":
            raise Rejected(
                415,
                "unsupported_media_type",
                f"Content-Type {kind or 'none'!r}: send application/x-protobuf or application/json",
            )
        body = await gw.body(request)
        try:
            signals = otlp_signals(
                body,
                json=kind == "application/json",
                episode_id=header_episode(request),
                limits=gw.value_limits,
            )
        except SignalDecodeError as exc:
            if exc.reason == "too_deep":
                raise Rejected(422, "too_deep", exc.message, limit=gw.settings.max_depth) from exc
            if exc.reason == "string_too_long":
                raise Rejected(
                    422, "string_too_long", exc.message, limit=gw.settings.max_string_length
                ) from exc
            raise Rejected(400, "invalid_otlp", exc.message) from exc
        spans = span_count(signals)
        if spans > gw.settings.max_signals:
            raise Rejected(
                413,
                "too_many_signals",
                f"{spans} spans in one request exceed {gw.settings.max_signals}",
                limit=gw.settings.max_signals,
            )
        await gw.publish(wire_records(signals, caller, gw.encoder))
        if kind == "application/json":
            return _json({})
        return Response(
            ExportTraceServiceResponse().SerializeToString(),
            200,
            media_type="application/x-protobuf",
        )


def _add_proxy_routes(app: GatewayApp, gw: Gateway, proxy: AnthropicProxy) -> None:
    @hot_post(
        app,
        "/v1/messages",
        summary="Recording proxy for the Anthropic Messages API",
        openapi_extra=openapi.MESSAGES_BODY,
        responses={
            200: {"description": "The upstream's answer, unchanged (JSON or event stream)."},
            **openapi.error_responses(401, 413),
        },
        tags=["proxy"],
    )
    async def post_messages(request: Request) -> Response:
        caller = gw.caller(request, proxy=True)
        body = await gw.raw_body(request)
        summary_source = body
        if request.headers.get("content-encoding"):
            summary_source = decode_content(
                body, request.headers.get("content-encoding"), gw.limits
            )
        summary = _request_json(summary_source)
        agent = request.headers.get(AGENT_HEADER)
        ctx = CallContext(
            call_id=f"px-{uuid.uuid4().hex}",
            caller=caller,
            episode_id=episode_from_headers(request.headers),
            agent=agent or None,
            started_ms=time.time() * 1000.0,
            started_monotonic=time.monotonic(),
            request=summary,
            streamed=summary.get("stream") is True,
        )
        return await proxy.messages(
            ctx, "/v1/messages", request.scope.get("query_string", b""), request.headers.raw, body
        )

    @hot_post(
        app,
        "/v1/messages/count_tokens",
        summary="Forwarded to the upstream unchanged (not recorded)",
        openapi_extra=openapi.MESSAGES_BODY,
        tags=["proxy"],
    )
    async def post_count_tokens(request: Request) -> Response:
        gw.caller(request, proxy=True)
        body = await gw.raw_body(request)
        return await proxy.forward_plain(
            "/v1/messages/count_tokens",
            request.scope.get("query_string", b""),
            request.headers.raw,
            body,
        )


def _add_operations_routes(app: FastAPI, gw: Gateway) -> None:
    @app.get("/healthz", summary="Liveness", tags=["operations"])
    async def healthz() -> Response:
        return _json({"status": "ok"})

    status = {
        "application/json": {
            "schema": {"type": "object", "properties": {"status": {"type": "string"}}}
        }
    }

    @app.get(
        "/readyz",
        summary="Readiness: the broker is reachable",
        tags=["operations"],
        responses={
            200: {"description": "Ready.", "content": status},
            503: {"description": "The broker is unreachable.", "content": status},
        },
    )
    async def readyz() -> Response:
        if await gw.publisher.ready():
            return _json({"status": "ready"})
        return _json({"status": "not ready"}, 503, {"Retry-After": str(gw.settings.retry_after_s)})

    @app.get(
        "/metrics",
        summary="Prometheus metrics",
        tags=["operations"],
        response_class=PlainTextResponse,
        responses={200: {"description": "Prometheus text format.", "content": {"text/plain": {}}}},
    )
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(gw.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def _request_json(body: bytes) -> dict[str, JSON]:
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return request if isinstance(request, dict) else {}
