"""The proxy's upstream client against a raw local HTTP server that answers exactly as told:
bodies framed by content-length, chunked, or ended by closing the connection; kept-alive
connections reused, and dropped when the upstream closed them; timeouts; no cookie jar; the
httpx fallback for environment proxies and injected transports."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvloop

from evalstream.assertions.errors import InputError
from evalstream.connectors.gateway import GatewaySettings, MemoryPublisher, create_gateway_app
from evalstream.connectors.gateway.upstream import (
    HttpxUpstream,
    LeanUpstream,
    UpstreamError,
    UpstreamResponse,
    upstream_for,
)

Answer = Callable[[bytes], list[bytes]]  # the request's head + body -> what to write, in pieces
Run = Callable[[Coroutine[Any, Any, None]], None]
# Every test on both loops: the gateway serves on uvloop (whose transports and TLS are its
# own), other code runs on asyncio's.
LOOPS = pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])


@dataclass
class RawServer:
    """Reads one request at a time per connection and writes the pieces `answer` returns; a
    piece `CLOSE` closes the connection, a piece `PAUSE` waits 50 ms."""

    answer: Answer
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0
    handlers: set[asyncio.Task[object]] = field(default_factory=set)
    writers: set[asyncio.StreamWriter] = field(default_factory=set)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        self.writers.add(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                for piece in self.answer(request):
                    if piece is CLOSE:
                        writer.close()
                        return
                    if piece is PAUSE:
                        await asyncio.sleep(0.05)
                        continue
                    writer.write(piece)
                    await writer.drain()
        writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


CLOSE = b"<close>"
PAUSE = b"<pause>"


@contextlib.asynccontextmanager
async def raw_server(answer: Answer, tls: ssl.SSLContext | None = None) -> AsyncIterator[RawServer]:
    raw = RawServer(answer)
    server = await asyncio.start_server(raw.serve, "127.0.0.1", 0, ssl=tls)
    raw.port = server.sockets[0].getsockname()[1]
    try:
        yield raw
    finally:
        server.close()
        for writer in raw.writers:
            writer.close()  # the handlers see the end of their connection and return
        await asyncio.gather(*raw.handlers, return_exceptions=True)


def fixed(body: bytes, *extra: bytes) -> Answer:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    return lambda _request: [
        head + b"".join(extra) + b"content-length: %d\r\n\r\n" % len(body) + body
    ]


async def exchange(
    upstream: LeanUpstream | HttpxUpstream, body: bytes = b"{}"
) -> tuple[UpstreamResponse, bytes]:
    response = await upstream.send(
        "/v1/messages", b"beta=true", [(b"x-api-key", b"k"), (b"accept", b"*/*")], body
    )
    try:
        return response, await response.read()
    finally:
        await response.aclose()


@LOOPS
def test_the_request_is_sent_whole_and_the_connection_kept_alive(run: Run) -> None:
    run(_the_request_is_sent_whole_and_the_connection_kept_alive())


async def _the_request_is_sent_whole_and_the_connection_kept_alive() -> None:
    async with raw_server(fixed(b'{"ok":1}', b"set-cookie: a=1\r\nset-cookie: b=2\r\n")) as raw:
        upstream = LeanUpstream(raw.url + "/base/", timeout_s=5)
        try:
            for n in range(5):
                response, body = await exchange(upstream, b'{"n":%d}' % n)
                assert (response.status, body) == (200, b'{"ok":1}')
                assert response.header("content-type") == "application/json"
                assert response.header("set-cookie") == "a=1, b=2"
        finally:
            await upstream.aclose()
    assert raw.connections == 1  # five calls, one kept-alive connection
    head, _, sent = raw.requests[3].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /base/v1/messages?beta=true HTTP/1.1"
    assert b"host: " + raw.url.removeprefix("http://").encode() in lines
    assert b"x-api-key: k" in lines
    assert b"content-length: 7" in lines
    assert sent == b'{"n":3}'
    assert not any(
        line.lower().startswith(b"cookie") for r in raw.requests for line in r.split(b"\r\n")
    )


@LOOPS
def test_exchanges_beyond_the_connection_limit_wait_for_a_free_one(run: Run) -> None:
    run(_exchanges_beyond_the_connection_limit_wait_for_a_free_one())


async def _exchanges_beyond_the_connection_limit_wait_for_a_free_one() -> None:
    async with raw_server(fixed(b'{"ok":1}')) as raw:
        upstream = LeanUpstream(raw.url, timeout_s=5, max_connections=1)
        try:
            first = await upstream.send("/v1/messages", b"", [], b"{}")
            second = asyncio.create_task(exchange(upstream))
            await asyncio.sleep(0.1)
            assert not second.done()  # waits: the first answer holds the only connection
            assert await first.read() == b'{"ok":1}'
            _, body = await second
            assert body == b'{"ok":1}'
            failed = await upstream.send("/v1/messages", b"", [], b"{}")
            await failed.aclose()  # closed unread: the slot is free again, the connection not
            _, body = await exchange(upstream)
            assert body == b'{"ok":1}'
            forgotten = await upstream.send("/v1/messages", b"", [], b"{}")
            del forgotten  # never read nor closed: collected, it gives its slot back
            gc.collect()
            _, body = await asyncio.wait_for(exchange(upstream), 5)
            assert body == b'{"ok":1}'
        finally:
            await upstream.aclose()
    assert raw.connections == 3  # the second call reused the first's connection


@LOOPS
def test_chunked_bodies_arrive_piece_by_piece(run: Run) -> None:
    run(_chunked_bodies_arrive_piece_by_piece())


async def _chunked_bodies_arrive_piece_by_piece() -> None:
    events = [b"event: a\ndata: {}\n\n", b"event: b\ndata: {}\n\n", b"event: c\ndata: {}\n\n"]

    def answer(_request: bytes) -> list[bytes]:
        pieces = [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"]
        pieces.append(b"transfer-encoding: chunked\r\n\r\n")
        for event in events:
            pieces += [b"%x\r\n%s\r\n" % (len(event), event), PAUSE]
        return [*pieces, b"0\r\n\r\n"]

    async with raw_server(answer) as raw:
        upstream = LeanUpstream(raw.url, timeout_s=5)
        try:
            for _ in range(2):
                response = await upstream.send("/v1/messages", b"", [], b"{}")
                got = [chunk async for chunk in response.chunks()]
                await response.aclose()
                assert got == events  # each event as its own chunk: nothing waited for the end
        finally:
            await upstream.aclose()
    assert raw.connections == 1


@LOOPS
def test_a_body_ended_by_closing_the_connection(run: Run) -> None:
    run(_a_body_ended_by_closing_the_connection())


async def _a_body_ended_by_closing_the_connection() -> None:
    def answer(_request: bytes) -> list[bytes]:
        return [b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\npart one, ", PAUSE, b"two", CLOSE]

    async with raw_server(answer) as raw:
        upstream = LeanUpstream(raw.url, timeout_s=5)
        try:
            for _ in range(2):
                _, body = await exchange(upstream)
                assert body == b"part one, two"
        finally:
            await upstream.aclose()
    assert raw.connections == 2  # a closed connection is not reused


@LOOPS
def test_a_kept_alive_connection_the_upstream_closed_is_not_used(run: Run) -> None:
    run(_a_kept_alive_connection_the_upstream_closed_is_not_used())


async def _a_kept_alive_connection_the_upstream_closed_is_not_used() -> None:
    # Answers framed and keep-alive, but the server closes each connection right after.
    body = b'{"ok":1}'
    head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body)
    async with raw_server(lambda _request: [head + body, CLOSE]) as raw:
        upstream = LeanUpstream(raw.url, timeout_s=5)
        try:
            for _ in range(3):
                _, got = await exchange(upstream)
                assert got == body
                await asyncio.sleep(0.05)  # the upstream's close arrives while idle
        finally:
            await upstream.aclose()
    assert raw.connections == 3
    assert len(raw.requests) == 3  # and no request was sent twice


@LOOPS
def test_failures_are_upstream_errors(run: Run) -> None:
    run(_failures_are_upstream_errors())


async def _failures_are_upstream_errors() -> None:
    unreachable = LeanUpstream("http://127.0.0.1:9", timeout_s=5)
    with pytest.raises(UpstreamError) as refused:
        await exchange(unreachable)
    assert refused.value.kind == "ConnectError"

    async with raw_server(lambda _request: [PAUSE, PAUSE, PAUSE, PAUSE]) as raw:
        slow = LeanUpstream(raw.url, timeout_s=0.05)
        with pytest.raises(UpstreamError) as timed_out:
            await exchange(slow)
        assert timed_out.value.kind == "ReadTimeout"
        await slow.aclose()

    cut = [b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part", CLOSE]
    async with raw_server(lambda _request: cut) as raw:
        upstream = LeanUpstream(raw.url, timeout_s=5)
        with pytest.raises(UpstreamError) as broken:
            await exchange(upstream)
        assert broken.value.kind == "RemoteProtocolError"
        await upstream.aclose()

    async with raw_server(lambda _request: [b"not http at all\r\n\r\n", CLOSE]) as raw:
        upstream = LeanUpstream(raw.url, timeout_s=5)
        with pytest.raises(UpstreamError):
            await exchange(upstream)
        await upstream.aclose()


def test_an_environment_proxy_or_an_injected_transport_selects_httpx(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for scheme in ("https", "http", "all"):
        monkeypatch.delenv(f"{scheme.upper()}_PROXY", raising=False)
        monkeypatch.delenv(f"{scheme}_proxy", raising=False)
    monkeypatch.setenv("NO_PROXY", "")

    def kind(url: str, transport: httpx.AsyncBaseTransport | None = None) -> type:
        upstream = upstream_for(url, timeout_s=1, transport=transport)
        asyncio.run(upstream.aclose())
        return type(upstream)

    assert kind("https://api.anthropic.com") is LeanUpstream
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert kind("https://api.anthropic.com") is HttpxUpstream
    assert kind("http://127.0.0.1:8000") is LeanUpstream
    monkeypatch.setenv("NO_PROXY", "api.anthropic.com")
    assert kind("https://api.anthropic.com") is LeanUpstream
    assert kind("http://127.0.0.1:8000", httpx.AsyncHTTPTransport()) is HttpxUpstream


@LOOPS
def test_the_httpx_fallback_answers_the_same_and_keeps_no_cookies(run: Run) -> None:
    run(_the_httpx_fallback_answers_the_same_and_keeps_no_cookies())


async def _the_httpx_fallback_answers_the_same_and_keeps_no_cookies() -> None:
    answer = fixed(b'{"ok":1}', b"set-cookie: session=tenant-a\r\n")
    async with raw_server(answer) as raw:
        upstream = HttpxUpstream(raw.url, timeout_s=5, transport=httpx.AsyncHTTPTransport())
        try:
            for _ in range(2):
                response, body = await exchange(upstream)
                assert (response.status, body) == (200, b'{"ok":1}')
                assert response.header("set-cookie") == "session=tenant-a"
        finally:
            await upstream.aclose()
    second = raw.requests[1].lower()
    assert b"session=tenant-a" not in second  # one tenant's cookie never reaches the next call


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
@LOOPS
def test_https_upstreams_are_verified_and_kept_alive(run: Run, tmp_path: Path) -> None:
    run(_https_upstreams_are_verified_and_kept_alive(tmp_path))


async def _https_upstreams_are_verified_and_kept_alive(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    command = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    command += f" -keyout {key} -out {cert} -days 1 -subj /CN=127.0.0.1"
    command += " -addext subjectAltName=IP:127.0.0.1"
    subprocess.run(command.split(), check=True, capture_output=True, timeout=60)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    async with raw_server(fixed(b'{"tls":true}'), server_tls) as raw:
        url = raw.url.replace("http://", "https://")
        trusting = LeanUpstream(
            url, timeout_s=5, ssl_context=ssl.create_default_context(cafile=cert)
        )
        try:
            for _ in range(3):
                response, body = await exchange(trusting)
                assert (response.status, body) == (200, b'{"tls":true}')
        finally:
            await trusting.aclose()
        assert raw.connections == 1
        untrusted = LeanUpstream(url, timeout_s=5)  # the default trust: not this certificate
        with pytest.raises(UpstreamError) as refused:
            await exchange(untrusted)
        assert refused.value.kind == "ConnectError"
        await untrusted.aclose()
    assert len(raw.requests) == 3  # nothing was sent over the unverified connection


@pytest.mark.parametrize("url", ["ftp://example.com", "api.anthropic.com", "http://", "http://h:x"])
def test_an_upstream_that_is_not_an_http_url_is_a_user_error(url: str) -> None:
    with pytest.raises(InputError, match="anthropic_upstream"):
        create_gateway_app(
            GatewaySettings(allow_anonymous=True, anthropic_upstream=url), MemoryPublisher()
        )
