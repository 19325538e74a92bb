"""Alert sinks against a real HTTP server on 127.0.0.1 that fails the first N requests."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import random
from typing import Any

import orjson
import pytest

from evalstream.connectors.alert_sinks import (
    AlertSinkError,
    AlertSinks,
    RetryPolicy,
    SlackSink,
    WebhookSink,
    make_sink,
)
from tests.scoring.http_peer import Answer, ScriptedServer
from tests.support.ports import free_port

FAST = RetryPolicy(max_attempts=4, backoff_base_s=0.001, backoff_max_s=0.005, timeout_s=5.0)
ALERT = {
    "dedupe_key": "ep-1/cost",
    "episode_id": "ep-1",
    "dimension": "cost",
    "severity": "critical",
    "value": 55.0,
    "threshold": 40.0,
    "message": "cost rose +55.00 % over file:b.json (> 40 %)",
}
WINDOWED = {
    "dedupe_key": "bot/default/score.overall",
    "state": "resolved",
    "metric": "score.overall",
    "severity": "warning",
    "message": "bot/default score.overall recovered",
}


class Failures:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, sink: str, reason: str) -> None:
        self.calls.append((sink, reason))


@pytest.mark.asyncio
async def test_webhook_retries_until_the_server_accepts() -> None:
    failures = Failures()
    with ScriptedServer([503, 502]) as server:
        async with WebhookSink("ops", server.url("/hook"), retry=FAST, on_failure=failures) as sink:
            assert sink.offer(ALERT)
        assert len(server.requests) == 3
        bodies = {r.body for r in server.requests}
        assert len(bodies) == 1  # the same body on every attempt
        assert orjson.loads(bodies.pop()) == {"version": 1, "source": "evalstream", "alert": ALERT}
        assert server.requests[0].path == "/hook"
        assert server.requests[0].headers["content-type"] == "application/json"
    assert (sink.stats.delivered, sink.stats.retries, sink.stats.failed) == (1, 2, 0)
    assert failures.calls == []


@pytest.mark.asyncio
async def test_exhausted_retries_count_one_failure() -> None:
    failures = Failures()
    with ScriptedServer(default_status=500) as server:
        async with WebhookSink("ops", server.url(), retry=FAST, on_failure=failures) as sink:
            sink.offer(ALERT)
        assert len(server.requests) == FAST.max_attempts
    assert failures.calls == [("ops", "exhausted")]
    assert sink.stats.failed == 1
    assert sink.stats.last_error is not None
    assert "HTTP 500" in sink.stats.last_error


@pytest.mark.asyncio
async def test_a_permanent_refusal_is_not_retried() -> None:
    failures = Failures()
    with ScriptedServer([Answer(404, b"no_service")]) as server:
        async with SlackSink("slack", server.url(), retry=FAST, on_failure=failures) as sink:
            sink.offer(ALERT)
        assert len(server.requests) == 1
    assert failures.calls == [("slack", "rejected")]
    assert sink.stats.last_error == "HTTP 404: no_service"


@pytest.mark.asyncio
async def test_rate_limit_is_retried_and_retry_after_raises_the_pause_up_to_the_cap() -> None:
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    policy = RetryPolicy(max_attempts=3, backoff_base_s=0.001, backoff_max_s=0.25)
    script = [
        Answer(429, headers=(("Retry-After", "0.2"),)),
        Answer(429, headers=(("Retry-After", "9"),)),
    ]
    with ScriptedServer(script) as server:
        async with WebhookSink("ops", server.url(), retry=policy, sleep=sleep) as sink:
            sink.offer(ALERT)
        assert len(server.requests) == 3
    assert sink.stats.delivered == 1
    assert pauses == [0.2, 0.25]


@pytest.mark.asyncio
async def test_connection_errors_are_retried() -> None:
    failures = Failures()
    url = f"http://127.0.0.1:{free_port()}/nobody-listens"
    async with WebhookSink("ops", url, retry=FAST, on_failure=failures) as sink:
        sink.offer(ALERT)
    assert failures.calls == [("ops", "exhausted")]
    assert sink.stats.retries == FAST.max_attempts - 1
    assert sink.stats.last_error is not None
    assert "ConnectError" in sink.stats.last_error


@pytest.mark.asyncio
async def test_a_timeout_is_a_retried_failure() -> None:
    failures = Failures()
    policy = RetryPolicy(max_attempts=2, backoff_base_s=0.001, timeout_s=0.05)
    with ScriptedServer(delay_s=0.5) as server:
        async with WebhookSink("ops", server.url(), retry=policy, on_failure=failures) as sink:
            sink.offer(ALERT)
        assert len(server.requests) == 2
    assert failures.calls == [("ops", "exhausted")]
    assert sink.stats.last_error is not None
    assert "Timeout" in sink.stats.last_error


@pytest.mark.asyncio
async def test_a_full_queue_drops_and_counts_instead_of_blocking() -> None:
    failures = Failures()
    with ScriptedServer(delay_s=0.05) as server:
        sink = WebhookSink("ops", server.url(), retry=FAST, queue_size=2, on_failure=failures)
        await sink.start()
        # No await between offers: the delivery task cannot take anything off the queue.
        accepted = [sink.offer({**ALERT, "episode_id": f"ep-{i}"}) for i in range(10)]
        await sink.close(drain_timeout_s=10)
        assert accepted == [True, True] + [False] * 8
        delivered = [orjson.loads(r.body)["alert"]["episode_id"] for r in server.requests]
    assert delivered == ["ep-0", "ep-1"]
    assert failures.calls == [("ops", "dropped")] * 8
    assert (sink.stats.offered, sink.stats.dropped, sink.stats.delivered) == (10, 8, 2)


@pytest.mark.asyncio
async def test_alerts_are_delivered_in_order() -> None:
    with ScriptedServer([500, 200, 500]) as server:
        async with WebhookSink("ops", server.url(), retry=FAST) as sink:
            for i in range(5):
                sink.offer({**ALERT, "episode_id": f"ep-{i}"})
        got = [orjson.loads(r.body)["alert"]["episode_id"] for r in server.requests]
    assert got == ["ep-0", "ep-0", "ep-1", "ep-1", "ep-2", "ep-3", "ep-4"]


@pytest.mark.asyncio
async def test_close_counts_what_could_not_be_delivered_in_time() -> None:
    failures = Failures()
    with ScriptedServer(delay_s=1.0) as server:
        sink = WebhookSink("ops", server.url(), retry=FAST, on_failure=failures)
        await sink.start()
        for _ in range(3):
            sink.offer(ALERT)
        await asyncio.to_thread(server.received_event.wait, 5)
        await sink.close(drain_timeout_s=0.05)
    # One was in flight when the sink gave up, two still queued: none is lost silently.
    assert failures.calls == [("ops", "exhausted")] * 3
    assert sink.stats.delivered == 0


@pytest.mark.asyncio
async def test_webhook_signature_verifies_with_the_shared_secret() -> None:
    with ScriptedServer() as server:
        async with WebhookSink(
            "ops", server.url(), secret="s3cret", headers={"Authorization": "Bearer t"}
        ) as sink:
            sink.offer(ALERT)
        [request] = server.requests
    expected = hmac.new(b"s3cret", request.body, hashlib.sha256).hexdigest()
    assert request.headers["x-evalstream-signature"] == f"sha256={expected}"
    assert request.headers["authorization"] == "Bearer t"


@pytest.mark.asyncio
async def test_slack_body_is_an_incoming_webhook_message() -> None:
    with ScriptedServer() as server:
        async with SlackSink("slack", server.url()) as sink:
            sink.offer(ALERT)
            sink.offer(WINDOWED)
        first, second = (orjson.loads(r.body) for r in server.requests)
    assert first["text"] == f"CRITICAL cost: {ALERT['message']}"
    section, context = first["blocks"]
    assert section["type"] == "section"
    assert section["text"]["type"] == "mrkdwn"
    assert section["text"]["text"].startswith(":rotating_light: *CRITICAL cost*\n")
    assert context["elements"][0]["text"] == "evalstream · ep-1/cost"
    assert second["text"].startswith("WARNING score.overall (resolved): ")
    assert second["blocks"][0]["text"]["text"].startswith(":white_check_mark:")


@pytest.mark.asyncio
async def test_fan_out_to_several_sinks() -> None:
    failures = Failures()
    with ScriptedServer() as good, ScriptedServer(default_status=400) as bad:
        sinks = AlertSinks(
            [
                make_sink("webhook", "good", good.url(), retry=FAST, on_failure=failures),
                make_sink("slack", "bad", bad.url(), retry=FAST, on_failure=failures),
            ]
        )
        async with sinks:
            assert sinks.offer(ALERT) == 2
        assert (len(good.requests), len(bad.requests)) == (1, 1)
    assert failures.calls == [("bad", "rejected")]


def test_backoff_is_exponential_with_equal_jitter_and_capped() -> None:
    policy = RetryPolicy(backoff_base_s=0.5, backoff_max_s=4.0)
    rng = random.Random(7)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (9, 4.0)]:
        pauses = [policy.delay(attempt, rng) for _ in range(200)]
        assert all(ceiling / 2 <= p <= ceiling for p in pauses)  # half fixed, half jitter
        assert max(pauses) > ceiling * 0.95  # jitter spans its half, not a fixed pause
        assert min(pauses) < ceiling * 0.55
    assert policy.delay(1, rng, retry_after=3.0) == 3.0
    assert policy.delay(1, rng, retry_after=60.0) == 4.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"url": "hooks.example/x"}, "must be absolute http"),
        ({"url": "ftp://hooks.example/x"}, "must be absolute http"),
        ({"queue_size": 0}, "queue_size must be >= 1"),
        ({"name": ""}, "non-empty name"),
    ],
)
def test_bad_sink_settings(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"name": "ops", "url": "https://hooks.example/x", **kwargs}
    with pytest.raises(AlertSinkError, match=match):
        WebhookSink(args.pop("name"), args.pop("url"), **args)


def test_bad_retry_settings_and_kinds() -> None:
    with pytest.raises(AlertSinkError, match="max_attempts must be an integer >= 1"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(AlertSinkError, match="backoff_base_s must be a number >= 0"):
        RetryPolicy(backoff_base_s=float("nan"))
    with pytest.raises(AlertSinkError, match="unknown alert sink kind 'pagerduty'; valid: slack"):
        make_sink("pagerduty", "p", "https://x.example")
    with pytest.raises(AlertSinkError, match="names must be unique: a"):
        AlertSinks([WebhookSink("a", "https://x.example"), SlackSink("a", "https://y.example")])
