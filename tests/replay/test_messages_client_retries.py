"""The live-replay client's retries against a local Messages API server: rate limits and
overload are retried (the server's `retry-after` honoured), a bad request is not, and the
attempts are bounded. Pauses go through an injected sleep, so nothing waits."""

from __future__ import annotations

import asyncio
import random

from evalstream.connectors.anthropic_api.messages_replay import CandidateReply, MessagesClient
from tests.support.messages_api import ErrorReply, MessagesAPIServer, Reply
from tests.support.ports import free_port

REQUEST: dict[str, object] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Review: eval(user_input)"}],
}


class Pauses:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def ask(
    base_url: str,
    pauses: Pauses,
    *,
    retries: int = 2,
    backoff_initial_s: float = 0.5,
    backoff_max_s: float = 30.0,
) -> CandidateReply:
    async def run() -> CandidateReply:
        client = MessagesClient(
            base_url,
            api_key="test",
            retries=retries,
            backoff_initial_s=backoff_initial_s,
            backoff_max_s=backoff_max_s,
            sleep=pauses,
            rng=random.Random(9),
        )
        try:
            return await client.create(dict(REQUEST))
        finally:
            await client.close()

    return asyncio.run(run())


def test_a_rate_limit_is_retried_after_the_servers_retry_after() -> None:
    pauses = Pauses()
    with MessagesAPIServer(handler=lambda req: Reply.text("eval is unsafe")) as server:
        server.enqueue(ErrorReply(429, "slow down", retry_after=7))
        reply = ask(server.base_url, pauses)
        assert len(server.messages_requests) == 2
    assert reply.error is None
    assert reply.content == "eval is unsafe"
    assert pauses.waits == [7.0]


def test_retry_after_ms_is_honoured_and_a_long_hint_is_capped() -> None:
    pauses = Pauses()
    with MessagesAPIServer(handler=lambda req: Reply.text("ok")) as server:
        server.enqueue(
            ErrorReply(429, headers={"retry-after-ms": "1250", "retry-after": "2"}),
            ErrorReply(503, retry_after=3600),
        )
        reply = ask(server.base_url, pauses, backoff_max_s=20.0)
        assert len(server.messages_requests) == 3
    assert reply.content == "ok"
    assert pauses.waits == [1.25, 20.0]


def test_overload_is_retried_with_the_back_off() -> None:
    pauses = Pauses()
    with MessagesAPIServer(handler=lambda req: Reply.text("ok")) as server:
        server.enqueue(ErrorReply(529, "Overloaded"))
        reply = ask(server.base_url, pauses, backoff_initial_s=2.0)
        assert len(server.messages_requests) == 2
    assert reply.error is None
    [wait] = pauses.waits
    assert 1.0 <= wait <= 2.0  # the first step, half of it fixed and half jittered


def test_a_bad_request_is_not_retried() -> None:
    pauses = Pauses()
    with MessagesAPIServer(handler=lambda req: ErrorReply(400, "max_tokens: too large")) as server:
        reply = ask(server.base_url, pauses)
        assert len(server.messages_requests) == 1
    assert reply.status == 400
    assert reply.error is not None
    assert "max_tokens: too large" in reply.error
    assert pauses.waits == []


def test_the_servers_no_overrides_the_status() -> None:
    pauses = Pauses()
    with MessagesAPIServer(handler=lambda req: ErrorReply(429, should_retry=False)) as server:
        reply = ask(server.base_url, pauses)
        assert len(server.messages_requests) == 1
    assert reply.status == 429
    assert pauses.waits == []


def test_retries_are_bounded_and_the_last_error_is_the_reply() -> None:
    pauses = Pauses()
    with MessagesAPIServer(handler=lambda req: ErrorReply(529, "Overloaded")) as server:
        reply = ask(server.base_url, pauses, retries=3)
        assert len(server.messages_requests) == 4
    assert reply.status == 529
    assert reply.error is not None
    assert "Overloaded" in reply.error
    assert len(pauses.waits) == 3


def test_a_connection_error_is_retried_then_reported() -> None:
    pauses = Pauses()
    reply = ask(f"http://127.0.0.1:{free_port()}", pauses, retries=1)
    assert reply.error is not None
    assert "ConnectError" in reply.error
    assert reply.status is None
    assert len(pauses.waits) == 1
