"""The proxy's HTTP/1.1 client for its upstream: pooled keep-alive connections, the request
written in one piece, the response parsed by httptools (C) and passed on chunk by chunk.

httpx (with httpcore, anyio and h11 in pure Python) cost the proxy more CPU per call than
everything else it does (docs/benchmarks.md, gateway). This client does only what a
forwarding proxy needs: no redirects, no cookie jar (a jar shared by every tenant's calls
would hand one tenant's cookies to the next), no content decoding (the proxy asks for
`identity`). `http://` and `https://` upstreams; when an HTTP proxy from the environment
(`HTTPS_PROXY`, ...) applies to the upstream, or a test injects an httpx transport, the
proxy uses `HttpxUpstream`, the same interface on httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import ssl
import urllib.request
from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import Protocol, cast
from urllib.parse import SplitResult, urlsplit

import httptools
import httpx

from evalstream.assertions.errors import InputError

Headers = list[tuple[bytes, bytes]]
MAX_IDLE = 64
MAX_CONNECTIONS = 512  # as httpx's limit was
PAUSE_BYTES = 1 << 20  # stop reading from the upstream while this much waits for the client


class UpstreamError(Exception):
    """The upstream could not be reached or broke the exchange; `kind` names what happened."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


class UpstreamResponse(Protocol):
    status: int
    headers: Headers

    def header(self, name: str) -> str | None: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def read(self) -> bytes: ...

    async def aclose(self) -> None: ...


class Upstream(Protocol):
    async def send(
        self, path: str, query: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse: ...

    async def aclose(self) -> None: ...


def _header(headers: Headers, name: str) -> str | None:
    wanted = name.encode("latin-1")
    values = [v.decode("latin-1") for k, v in headers if k.lower() == wanted]
    return ", ".join(values) if values else None


class _Connection(asyncio.Protocol):
    """One upstream connection; carries one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._parser = httptools.HttpResponseParser(self)
        self.reset()

    def reset(self) -> None:
        self.status = 0
        self.headers: Headers = []
        self.framed = False  # content-length or chunked: the body's end is in the message
        self.head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.complete = False
        self.keep_alive = False  # read while parsing: httptools forgets it after the message
        self.failure: UpstreamError | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._paused = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(UpstreamError("RemoteProtocolError", str(exc)))
            self.close()

    def eof_received(self) -> bool | None:
        if self.head.done() and not self.framed and not self.complete:
            self.on_message_complete()  # the body of an unframed response ends at EOF
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.complete:
            detail = type(exc).__name__ if exc else "the upstream closed the connection"
            self._fail(UpstreamError("RemoteProtocolError", detail))

    def pause_writing(self) -> None:  # requests are written in one piece; nothing to pause
        return None

    def resume_writing(self) -> None:
        return None

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        if self.status < 200:  # 1xx (e.g. 100 Continue): the real answer follows
            self.headers = []
            return
        for name, value in self.headers:
            lowered = name.lower()
            if lowered == b"content-length" or (
                lowered == b"transfer-encoding" and b"chunked" in value.lower()
            ):
                self.framed = True
        if not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.body.append(bytes(body))
        self.buffered += len(body)
        if self.buffered > PAUSE_BYTES and self.transport is not None and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.status < 200:
            return
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()
        self._wake()

    # the exchange
    def _fail(self, failure: UpstreamError) -> None:
        if self.failure is None:
            self.failure = failure
        if not self.head.done():
            self.head.set_exception(failure)
            self.head.exception()  # retrieved here; the caller re-raises it
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def next_chunk(self, timeout_s: float) -> bytes | None:
        """The next piece of the body; None at its end."""
        while not self.body:
            if self.complete:
                return None
            if self.failure is not None:
                raise self.failure
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout_s):
                    await self._wakeup
            except TimeoutError:
                raise UpstreamError("ReadTimeout") from None
        chunk = self.body.popleft()
        self.buffered -= len(chunk)
        if self._paused and self.buffered < PAUSE_BYTES // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return chunk

    def usable(self) -> bool:
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        sock = transport.get_extra_info("socket")
        if sock is None:
            return True
        try:
            readable, _, _ = select.select([sock.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def reusable(self) -> bool:
        return self.complete and not self.closed and self.failure is None and self.keep_alive

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _Response:
    def __init__(self, pool: LeanUpstream, conn: _Connection) -> None:
        self._pool = pool
        self._conn: _Connection | None = conn
        self.status = conn.status
        self.headers = conn.headers

    def header(self, name: str) -> str | None:
        return _header(self.headers, name)

    async def chunks(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            return
        while (chunk := await conn.next_chunk(self._pool.timeout_s)) is not None:
            yield chunk
        self._release()

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def aclose(self) -> None:
        self._abandon()

    def _abandon(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()  # not read to the end: the connection cannot carry another exchange
            self._pool.slots.release()

    def __del__(self) -> None:
        # A streamed answer whose relay never started (the client left first) is never
        # closed by the proxy: give its connection and slot back when it is collected.
        with contextlib.suppress(Exception):  # e.g. its event loop is closed already
            self._abandon()

    def _release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.release(conn)
            self._pool.slots.release()


class LeanUpstream:
    """Keep-alive HTTP/1.1 connections to one upstream origin."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        connect_timeout_s: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        parts = _checked(base_url)
        self.tls = parts.scheme == "https"
        self.host: str = parts.hostname or ""  # _checked: never empty
        self.port = parts.port or (443 if self.tls else 80)
        default_port = (self.tls and self.port == 443) or (not self.tls and self.port == 80)
        host_header = self.host if default_port else f"{self.host}:{self.port}"
        if ":" in self.host:  # an IPv6 literal
            host_header = f"[{self.host}]" if default_port else f"[{self.host}]:{self.port}"
        self.host_header = host_header.encode("latin-1")
        self.base_path = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.ssl_context = ssl_context or (_default_ssl_context() if self.tls else None)
        self._idle: deque[_Connection] = deque()
        # Exchanges under way (a response holds its slot until read or closed); more wait.
        self.slots = asyncio.Semaphore(max_connections)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await loop.create_connection(
                    _Connection,
                    self.host,
                    self.port,
                    ssl=self.ssl_context,
                    server_hostname=self.host if self.tls else None,
                )
        except TimeoutError:
            raise UpstreamError("ConnectTimeout") from None
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamError("ConnectError", type(exc).__name__) from exc
        return conn

    def _idle_connection(self) -> _Connection | None:
        """A kept-alive connection still open. A POST is never sent twice, so one the upstream
        may have closed meanwhile (readable while idle: its EOF is pending) is dropped."""
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
            conn.close()
        return None

    def release(self, conn: _Connection) -> None:
        if conn.reusable() and len(self._idle) < MAX_IDLE:
            self._idle.append(conn)
        else:
            conn.close()

    async def send(
        self, path: str, query: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse:
        target = (self.base_path + path).encode("latin-1") + (b"?" + query if query else b"")
        head = [b"POST ", target, b" HTTP/1.1\r\nhost: ", self.host_header, b"\r\n"]
        for name, value in headers:
            head += (name, b": ", value, b"\r\n")
        head += (b"content-length: ", str(len(body)).encode(), b"\r\n\r\n")
        request = b"".join(head) + body
        await self.slots.acquire()
        try:
            conn = self._idle_connection()
            if conn is None:
                conn = await self._connect()
            else:
                conn.reset()
            return await self._exchange(conn, request)
        except BaseException:
            self.slots.release()
            raise

    async def _exchange(self, conn: _Connection, request: bytes) -> UpstreamResponse:
        assert conn.transport is not None
        conn.transport.write(request)
        try:
            async with asyncio.timeout(self.timeout_s):
                await conn.head
        except TimeoutError:
            conn.close()
            raise UpstreamError("ReadTimeout") from None
        except UpstreamError:
            conn.close()
            raise
        return _Response(self, conn)

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()


def _default_ssl_context() -> ssl.SSLContext:
    """The trust httpx would use (certifi's bundle, where installed)."""
    try:
        import certifi  # noqa: PLC0415 - optional; httpx brings it

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:  # pragma: no cover - certifi comes with httpx
        return ssl.create_default_context()


# --- the same interface on httpx (an environment proxy, or an injected transport) ----------


class _HttpxResponse:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers: Headers = list(response.headers.raw)

    def header(self, name: str) -> str | None:
        return _header(self.headers, name)

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise UpstreamError(type(exc).__name__) from exc

    async def read(self) -> bytes:
        try:
            return await self._response.aread()
        except httpx.HTTPError as exc:
            raise UpstreamError(type(exc).__name__) from exc
        finally:
            await self._response.aclose()

    async def aclose(self) -> None:
        await self._response.aclose()


class HttpxUpstream:
    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=64),
            transport=transport,
        )

    async def send(
        self, path: str, query: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse:
        url = self.base_url + path + (("?" + query.decode("latin-1")) if query else "")
        self.client.cookies.clear()  # a proxy for many tenants keeps no cookies
        request = self.client.build_request("POST", url, headers=list(headers), content=body)
        try:
            return _HttpxResponse(await self.client.send(request, stream=True))
        except httpx.HTTPError as exc:
            raise UpstreamError(type(exc).__name__) from exc

    async def aclose(self) -> None:
        await self.client.aclose()


def _checked(base_url: str) -> SplitResult:
    parts = urlsplit(base_url)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = parts._replace(scheme="")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"anthropic_upstream {base_url!r} is not an http:// or https:// URL; set it to "
            "e.g. https://api.anthropic.com (--anthropic-upstream, "
            "EVALSTREAM_GATEWAY_ANTHROPIC_UPSTREAM)"
        )
    return parts


def upstream_for(
    base_url: str, *, timeout_s: float, transport: httpx.AsyncBaseTransport | None = None
) -> Upstream:
    """The lean client, unless a transport is injected or an environment proxy applies.
    Raises `InputError` for a URL that is not http(s)."""
    _checked(base_url)
    if transport is not None or _environment_proxy(base_url):
        return HttpxUpstream(base_url, timeout_s=timeout_s, transport=transport)
    return LeanUpstream(base_url, timeout_s=timeout_s)


def _environment_proxy(base_url: str) -> bool:
    parts = urlsplit(base_url)
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    with contextlib.suppress(Exception):
        if urllib.request.proxy_bypass(parts.netloc):
            return False
    return True
