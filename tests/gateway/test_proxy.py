"""The recording proxy with the official `anthropic` SDK (sync, async, streaming) in front
and the local Messages API server behind it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import orjson
import pytest
from anthropic.types import MessageParam, ToolParam, ToolUseBlock

from evalstream.connectors.gateway.publisher import MemoryPublisher
from tests.gateway.live import TOKENS, LiveServer, wait_for
from tests.support.messages_api import ErrorReply, MessagesAPIServer, Reply, Usage

JSON = Any
StartGateway = Callable[..., tuple[LiveServer, MemoryPublisher]]
API_KEY = "sk-ant-api03-client-key-" + "Q" * 40
MODEL = "claude-haiku-4-5"
HELLO: list[MessageParam] = [{"role": "user", "content": "Hello there"}]
TOOLS: list[ToolParam] = [
    {"name": "get_weather", "description": "d", "input_schema": {"type": "object"}}
]


def gateway_headers(tenant: str = "acme", **extra: str) -> dict[str, str]:
    return {"X-Evalstream-Token": TOKENS[tenant], **extra}


_CLIENTS: list[anthropic.Anthropic] = []


def sync_client(**options: Any) -> anthropic.Anthropic:
    """An SDK client closed after the test (an unclosed one leaks its sockets)."""
    client = anthropic.Anthropic(**options)
    _CLIENTS.append(client)
    return client


@pytest.fixture(autouse=True)
def close_clients() -> Iterator[None]:
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


def records(publisher: MemoryPublisher, count: int) -> list[JSON]:
    wait_for(lambda: len(publisher.records) >= count)
    return [orjson.loads(r.value) for r in publisher.records]


@pytest.fixture
def proxy(
    live_gateway: StartGateway, messages_api: MessagesAPIServer
) -> tuple[LiveServer, MemoryPublisher, MessagesAPIServer]:
    server, publisher = live_gateway(anthropic_upstream=messages_api.base_url)
    return server, publisher, messages_api


Proxy = tuple[LiveServer, MemoryPublisher, MessagesAPIServer]


def test_sync_call_is_forwarded_unchanged_and_recorded(proxy: Proxy) -> None:
    server, publisher, upstream = proxy
    upstream.enqueue(
        Reply.text("Hi!", usage=Usage(100, 20, cache_read_input_tokens=1000)),
        Reply.text("Hi!", usage=Usage(100, 20, cache_read_input_tokens=1000)),
    )
    direct = sync_client(base_url=upstream.base_url, api_key=API_KEY).messages.create(
        model=MODEL, max_tokens=50, messages=HELLO
    )
    client = sync_client(
        base_url=server.url,
        api_key=API_KEY,
        default_headers=gateway_headers(**{"X-Evalstream-Episode": "ep-sync"}),
    )
    proxied = client.messages.create(model=MODEL, max_tokens=50, messages=HELLO)
    assert proxied.content == direct.content
    assert proxied.usage == direct.usage
    assert proxied.stop_reason == direct.stop_reason == "end_turn"

    seen = upstream.messages_requests[-1]
    assert seen.api_key == API_KEY  # the client's key reaches the upstream
    assert "x-evalstream-token" not in seen.headers
    assert "x-evalstream-episode" not in seen.headers
    assert seen.body == upstream.messages_requests[0].body

    start, end = records(publisher, 2)
    assert {r["episode_id"] for r in (start, end)} == {"acme/ep-sync"}
    assert start["name"] == "provider:start"
    assert start["payload"]["model"] == MODEL
    assert start["payload"]["input"] == {
        "messages": 1,
        "tools": [],
        "maxTokens": 50,
        "stream": False,
    }
    assert end["name"] == "provider:end"
    assert end["source"] == {"provider": "anthropic", "parent": start["id"]}
    payload = end["payload"]
    assert payload["model"] == MODEL
    assert payload["stopReason"] == "end_turn"
    assert payload["messageId"] == proxied.id
    assert payload["output"]["content"] == "Hi!"
    assert payload["output"]["usage"] == {
        "inputTokens": 100,
        "outputTokens": 20,
        "totalTokens": 120,
        "cacheReadInputTokens": 1000,
        "cacheCreationInputTokens": 0,
    }
    # claude-haiku-4-5 as priced by the built-in table (USD per million tokens)
    assert payload["costUsd"] == pytest.approx((100 * 1.0 + 20 * 5.0 + 1000 * 0.1) / 1e6)
    assert payload["durationMs"] >= 0
    assert end["timestamp"] == pytest.approx(start["timestamp"] + payload["durationMs"])


def test_async_tool_use_is_recorded_as_tool_calls(proxy: Proxy) -> None:
    server, publisher, upstream = proxy
    upstream.enqueue(Reply.tool_use("get_weather", {"city": "Oslo"}, text="Checking."))

    async def call() -> anthropic.types.Message:
        client = anthropic.AsyncAnthropic(
            base_url=server.url,
            api_key=API_KEY,
            default_headers=gateway_headers("globex", **{"X-Evalstream-Session": "sess-1"}),
        )
        try:
            return await client.messages.create(
                model=MODEL, max_tokens=50, messages=HELLO, tools=TOOLS
            )
        finally:
            await client.close()

    message = asyncio.run(call())
    block = message.content[1]
    assert isinstance(block, ToolUseBlock)
    start, end, tool = records(publisher, 3)
    assert {r["episode_id"] for r in (start, end, tool)} == {"globex/sess-1"}
    assert start["payload"]["input"]["tools"] == ["get_weather"]
    assert end["payload"]["stopReason"] == "tool_use"
    assert end["payload"]["output"]["toolCalls"] == [
        {"id": block.id, "name": "get_weather", "input": {"city": "Oslo"}}
    ]
    assert tool["name"] == "tool:call"
    assert tool["payload"] == {"id": block.id, "name": "get_weather", "input": {"city": "Oslo"}}
    assert tool["source"]["parent"] == end["id"]
    assert tool["attrs"] == {"tenant": "globex"}


def test_streaming_is_passed_through_event_by_event(proxy: Proxy) -> None:
    server, publisher, upstream = proxy
    reply = Reply.tool_use(
        "get_weather", {"city": "Bergen", "days": 3}, text="A long answer " * 5, event_delay=0.1
    )
    upstream.enqueue(reply, reply)
    direct_events = []
    with sync_client(base_url=upstream.base_url, api_key=API_KEY).messages.stream(
        model=MODEL, max_tokens=50, messages=HELLO, tools=TOOLS
    ) as stream:
        direct_events = [event.type for event in stream]
        direct = stream.get_final_message()

    client = sync_client(
        base_url=server.url,
        api_key=API_KEY,
        default_headers=gateway_headers(**{"X-Evalstream-Episode": "ep-stream"}),
    )
    proxied_events = []
    recorded_when_first_event_arrived = None
    with client.messages.stream(model=MODEL, max_tokens=50, messages=HELLO, tools=TOOLS) as stream:
        for event in stream:
            if recorded_when_first_event_arrived is None:
                # The recording is made when the upstream stream ends: nothing recorded yet
                # means this event was passed on before the upstream had finished.
                recorded_when_first_event_arrived = len(publisher.records)
            proxied_events.append(event.type)
        proxied = stream.get_final_message()
    assert recorded_when_first_event_arrived == 0
    assert proxied_events == direct_events
    assert [b.model_dump(exclude={"id"}) for b in proxied.content] == [
        b.model_dump(exclude={"id"}) for b in direct.content
    ]
    start, end, tool = records(publisher, 3)
    assert start["payload"]["input"]["stream"] is True
    assert end["payload"]["output"]["content"] == "A long answer " * 5
    assert end["payload"]["output"]["usage"]["outputTokens"] == proxied.usage.output_tokens
    assert end["payload"]["stopReason"] == "tool_use"
    called = proxied.content[1]
    assert isinstance(called, ToolUseBlock)
    assert tool["payload"] == {
        "id": called.id,
        "name": "get_weather",
        "input": {"city": "Bergen", "days": 3},
    }


def test_async_streaming_text(proxy: Proxy) -> None:
    server, publisher, upstream = proxy
    upstream.enqueue(Reply.text("streamed text, in pieces"))

    async def call() -> str:
        client = anthropic.AsyncAnthropic(
            base_url=server.url, api_key=API_KEY, default_headers=gateway_headers()
        )
        try:
            async with client.messages.stream(model=MODEL, max_tokens=50, messages=HELLO) as s:
                return "".join([text async for text in s.text_stream])
        finally:
            await client.close()

    assert asyncio.run(call()) == "streamed text, in pieces"
    start, end = records(publisher, 2)
    assert start["episode_id"].startswith("acme/px-")  # no header: a new episode per call
    assert end["episode_id"] == start["episode_id"]
    assert end["payload"]["output"]["content"] == "streamed text, in pieces"


def test_upstream_errors_pass_through_unchanged_and_are_recorded(proxy: Proxy) -> None:
    server, publisher, upstream = proxy
    error = ErrorReply(429, "slow down", retry_after=7, should_retry=False)
    upstream.enqueue(error, error)
    body = {"model": MODEL, "max_tokens": 5, "messages": HELLO}
    headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
    direct = httpx.post(f"{upstream.base_url}/v1/messages", json=body, headers=headers)
    via = httpx.post(
        f"{server.url}/v1/messages", json=body, headers={**headers, **gateway_headers()}
    )
    assert via.status_code == direct.status_code == 429
    assert via.content == direct.content
    assert via.headers["retry-after"] == "7"
    assert via.headers["x-should-retry"] == "false"

    client = sync_client(
        base_url=server.url, api_key=API_KEY, default_headers=gateway_headers(), max_retries=0
    )
    upstream.enqueue(ErrorReply(529, "overloaded"))
    with pytest.raises(anthropic.APIStatusError) as raised:
        client.messages.create(model=MODEL, max_tokens=5, messages=HELLO)
    assert raised.value.status_code == 529
    out = records(publisher, 4)
    errors = [r for r in out if r["name"] == "provider:error"]
    assert [(e["payload"]["code"], e["payload"]["status"]) for e in errors] == [
        ("rate_limit_error", 429),
        ("overloaded_error", 529),
    ]
    assert errors[0]["payload"]["message"] == "slow down"


def test_an_error_inside_a_stream_is_recorded(proxy: Proxy) -> None:
    server, publisher, upstream = proxy
    upstream.enqueue(Reply.text("partial", stream_error=ErrorReply(529, "overloaded")))
    client = sync_client(
        base_url=server.url, api_key=API_KEY, default_headers=gateway_headers(), max_retries=0
    )
    with (
        pytest.raises(anthropic.APIStatusError),
        client.messages.stream(model=MODEL, max_tokens=5, messages=HELLO) as stream,
    ):
        stream.until_done()
    _, end = records(publisher, 2)
    assert end["name"] == "provider:error"
    assert end["payload"]["code"] == "overloaded_error"


def test_an_unreachable_upstream_is_a_502_and_recorded(live_gateway: StartGateway) -> None:
    server, publisher = live_gateway(anthropic_upstream="http://127.0.0.1:9")
    client = sync_client(
        base_url=server.url, api_key=API_KEY, default_headers=gateway_headers(), max_retries=0
    )
    with pytest.raises(anthropic.APIStatusError) as raised:
        client.messages.create(model=MODEL, max_tokens=5, messages=HELLO)
    assert raised.value.status_code == 502
    _, end = records(publisher, 2)
    assert end["payload"]["code"] == "upstream_unreachable"


def test_the_proxy_requires_the_gateway_token(proxy: Proxy) -> None:
    server, publisher, upstream = proxy
    client = sync_client(base_url=server.url, api_key=API_KEY, max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        client.messages.create(model=MODEL, max_tokens=5, messages=HELLO)
    assert upstream.requests == []
    assert publisher.records == []


def test_count_tokens_is_forwarded_without_recording(proxy: Proxy) -> None:
    server, publisher, upstream = proxy
    client = sync_client(base_url=server.url, api_key=API_KEY, default_headers=gateway_headers())
    counted = client.messages.count_tokens(model=MODEL, messages=HELLO)
    assert counted.input_tokens > 0
    assert upstream.requests[-1].path == "/v1/messages/count_tokens"
    assert publisher.records == []


def test_the_api_key_is_never_recorded_or_logged(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    server, publisher, upstream = proxy
    caplog.set_level(logging.DEBUG)
    upstream.enqueue(Reply.text("ok"), ErrorReply(401, "bad key"), Reply.text("ok"))
    client = sync_client(
        base_url=server.url, api_key=API_KEY, default_headers=gateway_headers(), max_retries=0
    )
    client.messages.create(model=MODEL, max_tokens=5, messages=HELLO)
    with pytest.raises(anthropic.AuthenticationError):
        client.messages.create(model=MODEL, max_tokens=5, messages=HELLO)
    with client.messages.stream(model=MODEL, max_tokens=5, messages=HELLO) as stream:
        stream.until_done()
    out = records(publisher, 6)
    published = b"".join(r.value for r in publisher.records).decode()
    assert API_KEY not in published
    assert TOKENS["acme"] not in published
    assert len(out) == 6
    gateway_logs = "\n".join(
        r.getMessage() for r in caplog.records if not r.name.startswith(("anthropic", "httpx2"))
    )
    assert API_KEY not in gateway_logs
    assert API_KEY not in httpx.get(f"{server.url}/metrics").text


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"X-Evalstream-Episode": "e" * 300}, "x-evalstream-episode"),
        ({"X-Evalstream-Agent": "a" * 300}, "x-evalstream-agent"),
    ],
)
def test_a_call_whose_headers_cannot_name_a_signal_is_refused_before_forwarding(
    proxy: Proxy, headers: dict[str, str], reason: str
) -> None:
    """Its records would be dead-lettered downstream and the call lost: the SDK gets a 400
    that names the header and the limit, and nothing reaches the upstream."""
    server, publisher, upstream = proxy
    client = sync_client(
        base_url=server.url,
        api_key=API_KEY,
        max_retries=0,
        default_headers=gateway_headers(**headers),
    )
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(model=MODEL, max_tokens=5, messages=HELLO)
    message = str(raised.value)
    assert reason in message
    assert "characters" in message
    assert "the limit is 256" in message
    assert upstream.requests == []
    assert publisher.records == []
