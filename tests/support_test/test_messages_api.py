"""The local Messages API server against the official `anthropic` SDK: sync, async, streaming,
tool use, errors with retry-after, delays, count_tokens, request recording and the prompt-cache
simulation."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import pytest
from anthropic.types import MessageParam

from tests.support.messages_api import (
    ErrorReply,
    MessagesAPIServer,
    MessagesRequest,
    Reply,
    TextBlock,
    ToolUseBlock,
    Usage,
    estimate_tokens,
)

USER: list[MessageParam] = [{"role": "user", "content": "Say hi"}]


@pytest.fixture
def client(messages_api: MessagesAPIServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=messages_api.base_url, api_key="test-key", max_retries=0
    ) as sdk:
        yield sdk


def test_json_reply_and_recorded_request(
    messages_api: MessagesAPIServer, client: anthropic.Anthropic
) -> None:
    messages_api.handler = lambda req: Reply.text(
        f"echo: {req.last_user_text}", usage=Usage(input_tokens=7, output_tokens=3)
    )
    message = client.messages.create(
        model="claude-test",
        max_tokens=50,
        system="be brief",
        messages=USER,
        extra_body={"temperature": 0},
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == "echo: Say hi"
    assert message.stop_reason == "end_turn"
    assert message.model == "claude-test"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (7, 3)

    [recorded] = messages_api.requests
    assert recorded.path == "/v1/messages"
    assert recorded.body["system"] == "be brief"
    assert recorded.body["temperature"] == 0
    assert recorded.api_key == "test-key"
    assert "anthropic-version" in recorded.headers


def test_tool_use_reply(messages_api: MessagesAPIServer, client: anthropic.Anthropic) -> None:
    messages_api.handler = lambda req: Reply.tool_use(
        "record_verdict", {"score": 4, "reason": "fine"}, text="thinking"
    )
    message = client.messages.create(model="m", max_tokens=50, messages=USER)
    assert message.stop_reason == "tool_use"
    text, tool = message.content
    assert text.type == "text"
    assert tool.type == "tool_use"
    assert tool.name == "record_verdict"
    assert tool.input == {"score": 4, "reason": "fine"}
    assert tool.id.startswith("toolu_")


def test_streaming_event_sequence_and_final_message(
    messages_api: MessagesAPIServer, client: anthropic.Anthropic
) -> None:
    long_text = "a fairly long answer that is split into several text deltas"
    messages_api.handler = lambda req: Reply(
        content=(TextBlock(long_text), ToolUseBlock("lookup", {"q": "weather in Paris"})),
        usage=Usage(input_tokens=11, output_tokens=22),
    )
    with client.messages.stream(model="m", max_tokens=50, messages=USER) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    assert events[0] == "message_start"
    assert events[-1] == "message_stop"
    assert events.count("content_block_start") == 2
    assert events.count("content_block_stop") == 2
    assert "message_delta" in events
    assert final.content[0].type == "text"
    assert final.content[0].text == long_text
    assert final.content[1].type == "tool_use"
    assert final.content[1].input == {"q": "weather in Paris"}
    assert final.stop_reason == "tool_use"
    assert final.usage.output_tokens == 22
    assert messages_api.requests[0].body["stream"] is True


def test_raw_stream_has_ping_and_json_deltas(messages_api: MessagesAPIServer) -> None:
    messages_api.handler = lambda req: Reply.tool_use("t", {"long_key": "x" * 30})
    body = {"model": "m", "max_tokens": 5, "messages": USER, "stream": True}
    response = httpx.post(f"{messages_api.base_url}/v1/messages", json=body)
    assert response.headers["content-type"] == "text/event-stream"
    events = [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    types = [e["type"] for e in events]
    assert types[:2] == ["message_start", "ping"]
    partial = [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"]
    assert len(partial) > 1
    assert json.loads("".join(partial)) == {"long_key": "x" * 30}


def test_stream_error_event_raises_in_sdk(
    messages_api: MessagesAPIServer, client: anthropic.Anthropic
) -> None:
    messages_api.handler = lambda req: Reply(
        stream_error=ErrorReply(529, "Overloaded"),
    )
    with (
        pytest.raises(anthropic.APIStatusError, match="Overloaded"),
        client.messages.stream(model="m", max_tokens=5, messages=USER) as stream,
    ):
        stream.get_final_message()


async def _async_create(base_url: str) -> str:
    async with anthropic.AsyncAnthropic(base_url=base_url, api_key="k", max_retries=0) as sdk:
        message = await sdk.messages.create(model="m", max_tokens=5, messages=USER)
        async with sdk.messages.stream(model="m", max_tokens=5, messages=USER) as stream:
            streamed = await stream.get_final_text()
    first = message.content[0]
    assert first.type == "text"
    return first.text + "|" + streamed


@pytest.mark.asyncio
async def test_async_client_json_and_stream(messages_api: MessagesAPIServer) -> None:
    messages_api.enqueue("first", "second")
    assert await _async_create(messages_api.base_url) == "first|second"
    assert len(messages_api.messages_requests) == 2


def test_error_with_anthropic_body(
    messages_api: MessagesAPIServer, client: anthropic.Anthropic
) -> None:
    messages_api.handler = lambda req: ErrorReply(400, "messages: bad role")
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="m", max_tokens=5, messages=USER)
    assert caught.value.status_code == 400
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "messages: bad role"},
    }


def test_rate_limit_then_success_is_retried_by_sdk(messages_api: MessagesAPIServer) -> None:
    messages_api.enqueue(ErrorReply(429, "slow down", retry_after=0), ErrorReply(529), "done")
    with anthropic.Anthropic(base_url=messages_api.base_url, api_key="k", max_retries=2) as sdk:
        message = sdk.messages.create(model="m", max_tokens=5, messages=USER)
    assert message.content[0].type == "text"
    assert message.content[0].text == "done"
    assert len(messages_api.requests) == 3


def test_rate_limit_surfaces_retry_after_header(
    messages_api: MessagesAPIServer, client: anthropic.Anthropic
) -> None:
    messages_api.handler = lambda req: ErrorReply(429, retry_after=7)
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(model="m", max_tokens=5, messages=USER)
    assert caught.value.response.headers["retry-after"] == "7"


def test_handler_exception_becomes_500(
    messages_api: MessagesAPIServer, client: anthropic.Anthropic
) -> None:
    def broken(request: MessagesRequest) -> str:
        raise ValueError("boom")

    messages_api.handler = broken
    with pytest.raises(anthropic.InternalServerError, match="boom"):
        client.messages.create(model="m", max_tokens=5, messages=USER)


def test_strict_mode_rejects_missing_max_tokens(messages_api: MessagesAPIServer) -> None:
    response = httpx.post(
        f"{messages_api.base_url}/v1/messages", json={"model": "m", "messages": USER}
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "max_tokens: Field required"


def test_delay_makes_client_time_out(messages_api: MessagesAPIServer) -> None:
    messages_api.handler = lambda req: Reply.text("late", delay=2.0)
    with (
        anthropic.Anthropic(
            base_url=messages_api.base_url, api_key="k", max_retries=0, timeout=0.2
        ) as sdk,
        pytest.raises(anthropic.APITimeoutError),
    ):
        sdk.messages.create(model="m", max_tokens=5, messages=USER)


def test_count_tokens(messages_api: MessagesAPIServer, client: anthropic.Anthropic) -> None:
    messages_api.count_tokens = lambda req: 42 if "Say hi" in req.all_text() else 0
    counted = client.messages.count_tokens(model="m", messages=USER)
    assert counted.input_tokens == 42
    messages_api.count_tokens_enabled = False
    with pytest.raises(anthropic.NotFoundError):
        client.messages.count_tokens(model="m", messages=USER)


def test_context_manager_frees_the_port() -> None:
    with MessagesAPIServer() as server:
        url = server.base_url
        assert httpx.post(f"{url}/v1/other", json={}).status_code == 404
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{url}/v1/messages", json={})


def test_prompt_cache_simulation_writes_then_reads_the_marked_prefix() -> None:
    system = "You grade outputs. " * 40
    with (
        MessagesAPIServer(prompt_cache=True) as server,
        anthropic.Anthropic(base_url=server.base_url, api_key="k", max_retries=0) as sdk,
    ):

        def ask(text: str, *, marked: bool = True) -> anthropic.types.Usage:
            block: dict[str, object] = {"type": "text", "text": system}
            if marked:
                block["cache_control"] = {"type": "ephemeral"}
            return sdk.messages.create(
                model="m",
                max_tokens=10,
                system=[block],  # type: ignore[list-item]
                messages=[{"role": "user", "content": text}],
            ).usage

        first, second, unmarked = ask("one"), ask("two, a longer one"), ask("x", marked=False)
    prefix = estimate_tokens(system)
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (prefix, 0)
    assert (second.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, prefix)
    assert second.input_tokens == estimate_tokens("two, a longer one")
    assert (unmarked.cache_creation_input_tokens, unmarked.cache_read_input_tokens) == (0, 0)
    assert unmarked.input_tokens == estimate_tokens(system + "\nx")
