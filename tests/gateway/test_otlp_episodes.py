"""OTLP traces as episodes: the attributes that select suites reach every span's signals, and
a trace-scoped episode ends when its root span does (hand-written OTLP JSON)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.testclient import TestClient

from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.codecs.otlp_genai import otlp_signals, span_count
from tests.gateway.conftest import AppFactory
from tests.gateway.live import bearer
from tests.gateway.test_otlp import otlp_json, span

JSON = Any
TRACE = "5b8efff798038103d269b633813fc60c"
ROOT, AGENT, CHAT = "aaaaaaaaaaaaaaa1", "aaaaaaaaaaaaaaa2", "aaaaaaaaaaaaaaa3"


def http_root(**extra: JSON) -> dict[str, JSON]:
    return span(
        ROOT,
        {"http.request.method": "POST", "http.route": "/chat"},
        name="POST /chat",
        kind=2,
        startTimeUnixNano="1700000000000000000",
        endTimeUnixNano="1700000002000000000",
        **extra,
    )


def agent_span(attrs: dict[str, JSON] | None = None) -> dict[str, JSON]:
    return span(
        AGENT,
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", **(attrs or {})},
        ROOT,
        startTimeUnixNano="1700000000100000000",
        endTimeUnixNano="1700000001900000000",
    )


def chat_span() -> dict[str, JSON]:
    return span(
        CHAT,
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-haiku-4-5"},
        AGENT,
        startTimeUnixNano="1700000000200000000",
        endTimeUnixNano="1700000001000000000",
    )


def by_name(signals: list[Signal]) -> dict[str, Signal]:
    return {s.name: s for s in signals}


def test_the_agent_under_an_http_root_names_the_whole_trace() -> None:
    signals = otlp_signals(otlp_json(http_root(), agent_span(), chat_span()), json=True)
    starts = [s for s in signals if s.id.endswith(":start")]
    assert [s.name for s in starts] == ["span:start", "agent:activated", "provider:start"]
    assert [s.attrs for s in starts] == [{"agent_id": "support"}] * 3


def test_an_explicit_evalstream_agent_id_wins_over_the_agent_span() -> None:
    body = otlp_json(http_root(), agent_span({"evalstream.agent_id": "support-v2"}))
    signals = otlp_signals(body, json=True)
    assert {s.attrs["agent_id"] for s in signals if s.attrs} == {"support-v2"}


def test_a_nested_agent_does_not_name_the_trace() -> None:
    sub = span(
        "aaaaaaaaaaaaaaa4",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"},
        AGENT,
        startTimeUnixNano="1700000000050000000",  # starts before its parent's record says
    )
    signals = otlp_signals(otlp_json(sub, agent_span(), http_root()), json=True)
    assert {s.attrs["agent_id"] for s in signals if s.attrs} == {"support"}


def test_children_exported_without_their_agent_carry_no_agent_id() -> None:
    """The pipeline then waits for the attribute (suite selection is deferred)."""
    signals = otlp_signals(otlp_json(chat_span()), json=True)
    assert all(s.attrs is None for s in signals)
    assert "harness:end" not in by_name(signals)  # the chat span has a parent: not the root


def test_the_root_span_ends_a_trace_scoped_episode() -> None:
    signals = otlp_signals(otlp_json(chat_span(), agent_span(), http_root()), json=True)
    assert signals[-1].name == "harness:end"
    end = signals[-1]
    assert end.id == f"otel:{TRACE}:{ROOT}:trace-end"
    assert end.episode_id == TRACE
    assert end.ts == 1_700_000_002_000.0  # the root span's end
    assert end.parent == f"otel:{TRACE}:{ROOT}:end"
    assert end.payload == {"durationMs": 2000.0, "span": "POST /chat", "status": "unset"}
    again = otlp_signals(otlp_json(http_root()), json=True)
    assert again[-1].id == end.id  # a re-sent root is a duplicate, not a second end


def test_a_failed_root_still_ends_the_episode_and_says_so() -> None:
    body = otlp_json(http_root(status={"code": 2, "message": "boom"}))
    end = by_name(otlp_signals(body, json=True))["harness:end"]
    assert end.payload["status"] == "error"


def test_episodes_spanning_several_traces_are_not_ended_by_one_root() -> None:
    conversation = otlp_json(http_root(attributes=[_attr("gen_ai.conversation.id", "conv-1")]))
    assert "harness:end" not in by_name(otlp_signals(conversation, json=True))
    named = otlp_signals(otlp_json(http_root()), json=True, episode_id="given")
    assert "harness:end" not in by_name(named)


def test_derived_ends_do_not_count_against_the_span_limit(make_app: AppFactory) -> None:
    roots = [
        span(f"bbbbbbbbbbbbbbb{i}", {}, traceId=f"{i}b8efff798038103d269b633813fc60c")
        for i in range(2)
    ]
    signals = otlp_signals(otlp_json(*roots), json=True)
    assert (len(signals), span_count(signals)) == (6, 2)
    app, publisher = make_app(max_signals=2)
    with TestClient(app) as http:
        response = http.post(
            "/v1/traces",
            content=otlp_json(*roots),
            headers={**bearer("acme"), "content-type": "application/json"},
        )
    assert response.status_code == 200, response.text
    names = [orjson.loads(r.value)["name"] for r in publisher.records]
    assert names.count("harness:end") == 2


def _attr(key: str, value: str) -> dict[str, JSON]:
    return {"key": key, "value": {"stringValue": value}}
