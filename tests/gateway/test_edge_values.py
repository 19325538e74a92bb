"""Values past the signal limits (docs/signals.md) are refused with 422 and a reason, on the
native, LLM-call and converted paths; nothing of such a request is published."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from evalstream.connectors.gateway.publisher import MemoryPublisher
from tests.gateway.conftest import AppFactory
from tests.gateway.live import bearer

GOOD = {"id": "s1", "episode_id": "ep-1", "name": "tool:call", "timestamp": 1_767_225_600_000}
POISONS: dict[str, tuple[dict[str, Any], str]] = {
    "timestamp 1e308": ({"timestamp": 1e308}, "timestamp_out_of_range"),
    "timestamp -1e308": ({"timestamp": -1e308}, "timestamp_out_of_range"),
    "timestamp 1e20": ({"timestamp": 1e20}, "timestamp_out_of_range"),
    "100k episode id": ({"episode_id": "x" * 100_000}, "id_too_long"),
    "NUL in episode id": ({"episode_id": "a\x00b"}, "bad_id_character"),
    "NUL in signal id": ({"id": "s\x001"}, "bad_id_character"),
    "huge cost": (
        {"name": "provider:end", "payload": {"costUsd": 1e300}},
        "number_out_of_range",
    ),
}


@pytest.fixture
def client(make_app: AppFactory) -> Iterator[tuple[TestClient, MemoryPublisher]]:
    app, publisher = make_app(max_body_bytes=1024 * 1024, max_string_length=200_000)
    with TestClient(app) as test_client:
        yield test_client, publisher


@pytest.mark.parametrize(("change", "reason"), POISONS.values(), ids=list(POISONS))
def test_a_signal_past_the_limits_is_refused_with_its_reason(
    client: tuple[TestClient, MemoryPublisher], change: dict[str, Any], reason: str
) -> None:
    http, publisher = client
    body = orjson.dumps([GOOD, {**GOOD, "id": "s2", **change}])
    response = http.post(
        "/v1/signals",
        content=body,
        headers={**bearer("acme"), "content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    [detail] = response.json()["error"]["details"]
    assert detail["index"] == 1
    assert detail["reason"] == reason
    assert len(detail["message"]) < 400
    assert publisher.records == []


def test_an_episode_id_over_the_limit_with_its_tenant_prefix_is_refused(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    body = orjson.dumps({**GOOD, "episode_id": "e" * 256})  # "acme/" + 256 characters
    response = http.post(
        "/v1/signals", content=body, headers={**bearer("acme"), "content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["details"][0]["reason"] == "id_too_long"
    assert publisher.records == []


def test_an_llm_call_past_the_limits_is_refused(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    call = {"id": "c1", "episode_id": "ep-1", "timestamp": 1e308, "model": "m", "durationMs": 5}
    response = http.post(
        "/v1/llm-calls",
        content=orjson.dumps(call),
        headers={**bearer("acme"), "content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["details"][0]["reason"] == "timestamp_out_of_range"
    assert publisher.records == []


def test_ordinary_signals_are_still_accepted(client: tuple[TestClient, MemoryPublisher]) -> None:
    http, publisher = client
    response = http.post(
        "/v1/signals",
        content=orjson.dumps(GOOD),
        headers={**bearer("acme"), "content-type": "application/json"},
    )
    assert response.status_code == 202, response.text
    assert len(publisher.records) == 1
