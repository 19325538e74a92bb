"""The anthropic SDK, instrumented in-process: a target that calls Claude records its calls as
provider:start / provider:end signals without code changes (against a local Messages API)."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic

from evalstream.assertions.evalruns.models import DatasetResult
from evalstream.connectors.targets.anthropic_hook import RecordingTransport, recording_client
from evalstream.connectors.targets.python_callable import CallableTarget
from evalstream.connectors.targets.recorder import Recorder
from evalstream.stream.evalruns.runner import RunSettings, run_dataset
from tests.evals import targets_for_tests as t
from tests.evals.conftest import make_suite
from tests.support.messages_api import (
    ErrorReply,
    MessagesAPIServer,
    MessagesRequest,
    Reply,
    Usage,
    messages_api,
)

__all__ = ["messages_api"]  # the fixture


def answer(request: MessagesRequest) -> Reply:
    if request.model.startswith("claude-opus"):
        return Reply.text("Refunds take 3-5 days, as KB-7 says.", usage=Usage(40, 12))
    return Reply.text("refunds take 3-5 days", usage=Usage(30, 6))


def run(suite_cases: list[dict[str, Any]], name: str, **settings: Any) -> DatasetResult:
    target = CallableTarget(f"tests.evals.targets_for_tests:{name}", getattr(t, name))
    return asyncio.run(run_dataset(make_suite(suite_cases), target, RunSettings(**settings)))


def test_a_claude_calling_target_is_recorded_without_code_changes(
    messages_api: MessagesAPIServer,
) -> None:
    messages_api.handler = answer
    case = {
        "id": "refund-time",
        "input": {"base_url": messages_api.base_url, "question": "How long do refunds take?"},
        "assertions": [
            {"type": "signal.count", "pattern": "provider:end", "exact": 2},
            {"type": "metric.tokens.max", "value": 88, "field": "total"},
            {"type": "metric.tokens.min", "value": 88, "field": "total"},
            {
                "type": "signal.trajectory",
                "patterns": [
                    {"pattern": "provider:start", "payload": {"model": "claude-haiku-4-5"}},
                    "provider:end",
                    {"pattern": "provider:start", "payload": {"model": "claude-opus-4-1"}},
                    "provider:end",
                ],
            },
            {"type": "output.contains", "text": "KB-7"},
        ],
    }
    result = run([case], "claude_agent")
    sample = result.cases[0].samples[0]
    assert sample.status == "passed", (sample.error, sample.assertions)
    ends = [s for s in sample.signals if s["name"] == "provider:end"]
    assert [e["payload"]["output"]["content"] for e in ends] == [
        "refunds take 3-5 days",
        "Refunds take 3-5 days, as KB-7 says.",  # the streamed reply, reassembled
    ]
    assert ends[1]["payload"]["output"]["usage"]["outputTokens"] == 12
    assert ends[1]["source"]["parent"] == next(
        s["id"]
        for s in sample.signals
        if s["name"] == "provider:start" and s["payload"]["model"] == "claude-opus-4-1"
    )
    assert sample.metrics is not None
    assert sample.metrics.cost > 0  # priced from usage with the built-in table
    assert [r.body["model"] for r in messages_api.messages_requests] == [
        "claude-haiku-4-5",
        "claude-opus-4-1",
    ]
    # Outside a run nothing is patched: a client built now is not recording.
    with anthropic.Anthropic(base_url=messages_api.base_url, api_key="test") as client:
        assert not isinstance(client._client._transport, RecordingTransport)


def test_api_errors_are_recorded_and_the_sample_errors(messages_api: MessagesAPIServer) -> None:
    messages_api.enqueue(ErrorReply(529, "overloaded"))
    case = {
        "id": "down",
        "input": {"base_url": messages_api.base_url, "question": "hi"},
        "assertions": [{"type": "output.contains", "text": "x"}],
    }
    sample = run([case], "claude_agent").cases[0].samples[0]
    assert (sample.status, sample.error_kind) == ("error", "target")
    assert "OverloadedError" in (sample.error or "") or "529" in (sample.error or "")
    [err] = [s for s in sample.signals if s["name"] == "provider:error"]
    assert err["payload"]["code"] == 529
    assert "overloaded" in err["payload"]["error"]


def test_async_client_and_tool_use(messages_api: MessagesAPIServer) -> None:
    messages_api.enqueue(Reply.tool_use("lookup_order", {"order_id": "A-1"}, text="checking"))
    case = {
        "id": "tools",
        "input": {"base_url": messages_api.base_url, "question": "where?"},
        "assertions": [{"type": "signal.contains", "pattern": "provider:end"}],
    }
    sample = run([case], "async_claude_agent").cases[0].samples[0]
    assert sample.status == "passed"
    [end] = [s for s in sample.signals if s["name"] == "provider:end"]
    assert end["payload"]["output"]["toolCalls"] == [
        {
            "id": end["payload"]["output"]["toolCalls"][0]["id"],
            "name": "lookup_order",
            "input": {"order_id": "A-1"},
        }
    ]
    assert end["payload"]["stopReason"] == "tool_use"


def test_explicit_recording_client(messages_api: MessagesAPIServer) -> None:
    rec = Recorder(episode_id="ep", case_id="c")
    with anthropic.Anthropic(
        base_url=messages_api.base_url, api_key="test", http_client=recording_client(rec, "bot")
    ) as client:
        client.messages.create(
            model="claude-haiku-4-5", max_tokens=5, messages=[{"role": "user", "content": "hello"}]
        )
    assert [(s.name, s.agent) for s in rec.signals] == [
        ("provider:start", "bot"),
        ("provider:end", "bot"),
    ]
    assert rec.signals[0].payload["input"]["messages"] == [{"role": "user", "content": "hello"}]
