"""The busy endpoints are served straight by their handlers (`GatewayApp`), past FastAPI's
per-request layers: what a client and `/metrics` see must be what FastAPI would give."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
import pytest
from starlette.testclient import TestClient

from evalstream.connectors.gateway import GatewaySettings, MemoryPublisher, create_gateway_app
from evalstream.connectors.gateway.publisher import OutRecord
from tests.gateway.conftest import AppFactory
from tests.gateway.live import bearer, token_env

HOT = (
    "/v1/signals",
    "/v1/llm-calls",
    "/v1/episodes",
    "/v1/litellm",
    "/v1/traces",
    "/v1/messages",
    "/v1/messages/count_tokens",
)
SIGNAL = {"episode_id": "e", "name": "tool:call", "timestamp": 1}


def requests_total(http: TestClient, endpoint: str, status: int) -> float:
    prefix = f'evalstream_gateway_requests_total{{endpoint="{endpoint}",status="{status}"}} '
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line.removeprefix(prefix))
    return 0.0


def test_every_busy_endpoint_is_hot_and_still_in_the_openapi_description(
    make_app: AppFactory,
) -> None:
    app, _ = make_app()
    assert sorted(app.hot_routes) == sorted(HOT)
    with TestClient(app) as http:
        paths = http.get("/openapi.json").json()["paths"]
    for path in HOT:
        assert "post" in paths[path]


def test_answers_and_request_counts_match_the_routes(make_app: AppFactory) -> None:
    app, publisher = make_app()
    with TestClient(app) as http:
        accepted = http.post("/v1/signals", json=[SIGNAL], headers=bearer("acme"))
        assert accepted.status_code == 202
        assert accepted.json() == {"accepted": 1, "episode_ids": ["acme/e"]}
        refused = http.post("/v1/signals", json=[SIGNAL])
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "missing_token"
        assert refused.headers["www-authenticate"].startswith("Bearer")
        # Other methods on a hot path go through FastAPI, which knows only POST there.
        assert http.get("/v1/signals").status_code == 405
        assert requests_total(http, "/v1/signals", 202) == 1
        assert requests_total(http, "/v1/signals", 401) == 1
        assert requests_total(http, "/v1/signals", 405) == 1
        body = 'evalstream_gateway_request_bytes_total{endpoint="/v1/signals"}'
        assert body in http.get("/metrics").text
    assert len(publisher.records) == 1


class Exploding(MemoryPublisher):
    async def publish(self, records: Sequence[OutRecord]) -> None:
        raise RuntimeError("a bug, not a broker outage")


def test_an_unexpected_error_is_a_plain_500_and_reaches_the_server() -> None:
    app = create_gateway_app(GatewaySettings(tokens=token_env()), Exploding())
    with TestClient(app, raise_server_exceptions=False) as http:
        response = http.post("/v1/signals", content=orjson.dumps([SIGNAL]), headers=bearer("acme"))
        assert (response.status_code, response.text) == (500, "Internal Server Error")
        assert requests_total(http, "/v1/signals", 500) == 1
    with TestClient(app) as http, pytest.raises(RuntimeError, match="a bug"):
        http.post("/v1/signals", content=orjson.dumps([SIGNAL]), headers=bearer("acme"))
