"""The ingest endpoints in-process: every kind of bad input gets its documented status and
body and publishes nothing; tenants are stamped by the server; secrets are redacted."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from evalstream.connectors.gateway import Unavailable
from evalstream.connectors.gateway.publisher import MemoryPublisher
from tests.gateway.conftest import AppFactory
from tests.gateway.live import TOKENS, bearer

JSON = Any


def signal(n: int = 0, episode: str | None = "ep-1", **extra: JSON) -> dict[str, JSON]:
    out: dict[str, JSON] = {"id": f"s{n}", "name": "tool:call", "timestamp": 1_700_000_000_000 + n}
    if episode is not None:
        out["episode_id"] = episode
    out["payload"] = {"name": "Read", "input": {"path": f"/tmp/{n}"}}
    out.update(extra)
    return out


def ndjson(items: list[JSON]) -> bytes:
    return b"\n".join(orjson.dumps(i) for i in items) + b"\n"


@pytest.fixture
def client(make_app: AppFactory) -> Iterator[tuple[TestClient, MemoryPublisher]]:
    app, publisher = make_app(
        max_body_bytes=64 * 1024, max_signals=50, max_depth=8, max_string_length=1000
    )
    with TestClient(app) as test_client:
        yield test_client, publisher


def published(publisher: MemoryPublisher) -> list[tuple[str, str, JSON]]:
    return [(r.stream, r.key, orjson.loads(r.value)) for r in publisher.records]


# --- accepted input ---------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["array", "ndjson", "object", "ndjson-without-type"])
def test_signals_are_accepted_in_every_body_shape(
    client: tuple[TestClient, MemoryPublisher], shape: str
) -> None:
    http, publisher = client
    items = [signal(0), signal(1)] if shape != "object" else [signal(0)]
    body, ctype = {
        "array": (orjson.dumps(items), "application/json"),
        "ndjson": (ndjson(items), "application/x-ndjson"),
        "object": (orjson.dumps(items[0]), "application/json"),
        "ndjson-without-type": (ndjson(items), "application/x-www-form-urlencoded"),
    }[shape]
    response = http.post(
        "/v1/signals", content=body, headers={**bearer("acme"), "content-type": ctype}
    )
    assert response.status_code == 202, response.text
    assert response.json() == {"accepted": len(items), "episode_ids": ["acme/ep-1"]}
    out = published(publisher)
    assert [(stream, key) for stream, key, _ in out] == [("signals", "acme/ep-1")] * len(items)
    for (_, _, record), sent in zip(out, items, strict=True):
        assert record == {**sent, "episode_id": "acme/ep-1", "attrs": {"tenant": "acme"}}


def test_gzip_and_deflate_bodies_are_accepted(client: tuple[TestClient, MemoryPublisher]) -> None:
    http, publisher = client
    body = ndjson([signal(0), signal(1)])
    for encoding, data in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body))):
        headers = {**bearer("acme"), "content-encoding": encoding}
        response = http.post("/v1/signals", content=data, headers=headers)
        assert response.status_code == 202, (encoding, response.text)
    assert len(publisher.records) == 4


def test_the_episode_header_names_the_episode_of_seed_003_signals(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    seed003 = {"id": "a", "name": "agent:activated", "payload": {"agent": "x"}, "timestamp": 5}
    response = http.post(
        "/v1/signals",
        json=[seed003],
        headers={**bearer("acme"), "x-evalstream-episode": "run-7"},
    )
    assert response.status_code == 202
    assert published(publisher)[0][1] == "acme/run-7"


def test_signals_without_ids_get_stable_content_ids(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    item = signal(0)
    del item["id"]
    for _ in range(2):
        assert http.post("/v1/signals", json=[item], headers=bearer("acme")).status_code == 202
    first, second = (r[2]["id"] for r in published(publisher))
    assert first == second
    assert first.startswith("c-")


def test_llm_calls_native_and_air_are_published_to_the_llm_calls_stream(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    native = {
        "id": "call-1",
        "episode_id": "ep-9",
        "timestamp": "2026-01-01T00:00:00Z",
        "durationMs": 120,
        "model": "claude-sonnet-4-5",
        "provider": "anthropic",
        "output": {"content": "hi", "usage": {"inputTokens": 10, "outputTokens": 3}},
    }
    air = {
        "version": "1",
        "run_id": "run-abc",
        "trace_id": "t-1",
        "timestamp": "2026-01-01T00:00:01Z",
        "model": "gpt-4o",
        "provider": "openai",
        "endpoint": "/v1/chat/completions",
        "tokens": {"prompt": 7, "completion": 2, "total": 9},
        "duration_ms": 80,
        "status": "success",
    }
    response = http.post(
        "/v1/llm-calls",
        json=[native, air],
        headers={**bearer("globex"), "x-evalstream-session": "sess-1"},
    )
    assert response.status_code == 202, response.text
    (s1, k1, r1), (s2, k2, r2) = published(publisher)
    assert (s1, k1) == ("llm-calls", "globex/ep-9")
    assert (s2, k2) == ("llm-calls", "globex/sess-1")  # AIR names no episode: the header does
    assert r1 == {**native, "episode_id": "globex/ep-9", "attrs": {"tenant": "globex"}}
    assert r2 == {**air, "episode_id": "globex/sess-1", "attrs": {"tenant": "globex"}}


def test_an_air_record_without_any_episode_is_refused(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    air = {"run_id": "r", "tokens": {}, "timestamp": "2026-01-01T00:00:00Z"}
    response = http.post("/v1/llm-calls", json=[air], headers=bearer("acme"))
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["reason"] == "missing_episode_id"
    assert publisher.records == []


# --- refused input: status, body, nothing published -------------------------------------


def deep(levels: int) -> JSON:
    value: JSON = "leaf"
    for _ in range(levels):
        value = {"x": value}
    return value


def chunks(data: bytes, size: int = 4096) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


BAD_INPUTS: list[tuple[str, dict[str, JSON], int, str]] = [
    ("no token", {"json": [signal()]}, 401, "missing_token"),
    (
        "unknown token",
        {"json": [signal()], "headers": {"authorization": "Bearer evs_not_a_known_token_123"}},
        401,
        "invalid_token",
    ),
    (
        "body too large (Content-Length)",
        {"content": b"[" + b" " * 70_000 + b"]"},
        413,
        "body_too_large",
    ),
    (
        "body too large (chunked, no Content-Length)",
        {"content": chunks(b"[" + b" " * 70_000 + b"]")},
        413,
        "body_too_large",
    ),
    (
        "gzip bomb",
        {"content": gzip.compress(b" " * 1_000_000), "headers": {"content-encoding": "gzip"}},
        413,
        "body_too_large",
    ),
    ("too many signals", {"json": [signal(i) for i in range(51)]}, 413, "too_many_signals"),
    (
        "too many NDJSON lines",
        {"content": ndjson([signal(i) for i in range(51)])},
        413,
        "too_many_signals",
    ),
    ("nested too deep", {"json": [signal(payload=deep(9))]}, 422, "too_deep"),
    ("nested beyond the parser", {"content": b"[" * 2000 + b"]" * 2000}, 422, "too_deep"),
    ("string too long", {"json": [signal(payload="x" * 1001)]}, 422, "string_too_long"),
    ("key too long", {"json": [signal(payload={"k" * 1001: 1})]}, 422, "string_too_long"),
    ("invalid JSON", {"content": b'[{"name": '}, 400, "invalid_json"),
    ("invalid NDJSON line", {"content": b'{"a":1}\n{nope\n'}, 400, "invalid_json"),
    ("empty body", {"content": b""}, 400, "empty_body"),
    (
        "corrupt gzip",
        {"content": b"\x1f\x8bnot gzip", "headers": {"content-encoding": "gzip"}},
        400,
        "bad_encoding",
    ),
    (
        "unknown encoding",
        {"content": b"[]", "headers": {"content-encoding": "br"}},
        415,
        "unsupported_encoding",
    ),
    ("a signal without a name", {"json": [signal(), {"timestamp": 1}]}, 422, "invalid_signal"),
    ("a signal without an episode", {"json": [signal(episode=None)]}, 422, "invalid_signal"),
    ("not an object", {"json": [1, "two"]}, 422, "invalid_signal"),
]


@pytest.mark.parametrize(
    ("kwargs", "status", "code"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_input_gets_its_status_and_body_and_nothing_is_published(
    client: tuple[TestClient, MemoryPublisher], kwargs: dict[str, JSON], status: int, code: str
) -> None:
    http, publisher = client
    headers = {**bearer("acme"), **kwargs.pop("headers", {})}
    if code in ("missing_token",):
        headers.pop("authorization")
    response = http.post("/v1/signals", headers=headers, **kwargs)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    if code in ("body_too_large", "too_many_signals", "string_too_long") or (
        code == "too_deep" and "parser" not in str(kwargs)
    ):
        assert error["limit"] in (64 * 1024, 50, 1000, 8)
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert publisher.records == []
    metrics = http.get("/metrics").text
    assert f'evalstream_gateway_rejections_total{{endpoint="/v1/signals",reason="{code}"}} 1.0' in (
        metrics
    )


def test_invalid_records_are_listed_with_their_index_and_reason(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    items = [signal(0), {"timestamp": 1, "episode_id": "e"}, signal(2), signal(3, timestamp=[1])]
    response = http.post("/v1/signals", json=items, headers=bearer("acme"))
    assert response.status_code == 422
    details = response.json()["error"]["details"]
    assert [(d["index"], d["reason"]) for d in details] == [
        (1, "missing_name"),
        (3, "bad_timestamp"),
    ]
    assert publisher.records == []


def test_an_unavailable_broker_gives_503_with_retry_after(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    publisher.fail_with = Unavailable("broker_unreachable", "cannot reach Kafka")
    response = http.post("/v1/signals", json=[signal()], headers=bearer("acme"))
    assert response.status_code == 503
    assert response.headers["retry-after"] == "2"
    assert response.json()["error"]["code"] == "broker_unreachable"
    assert http.get("/readyz").status_code == 503
    publisher.fail_with = None
    assert http.get("/readyz").status_code == 200


# --- tenants ------------------------------------------------------------------------------


def test_tenants_cannot_write_into_each_others_episodes(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    attack = signal(0, episode="globex/ep-1", attrs={"tenant": "globex", "case_id": "c"})
    assert http.post("/v1/signals", json=[signal(0)], headers=bearer("globex")).status_code == 202
    assert http.post("/v1/signals", json=[signal(0)], headers=bearer("acme")).status_code == 202
    assert http.post("/v1/signals", json=[attack], headers=bearer("acme")).status_code == 202
    out = published(publisher)
    keys = [key for _, key, _ in out]
    assert keys == ["globex/ep-1", "acme/ep-1", "acme/globex/ep-1"]
    assert [record["attrs"]["tenant"] for _, _, record in out] == ["globex", "acme", "acme"]
    assert out[2][2]["attrs"]["case_id"] == "c"  # other attrs are kept
    assert all(record["episode_id"] == key for _, key, record in out)


def test_without_auth_episode_ids_are_kept_and_a_claimed_tenant_is_dropped(
    make_app: AppFactory,
) -> None:
    app, publisher = make_app(allow_anonymous=True)
    with TestClient(app) as http:
        claimed = signal(0, attrs={"tenant": "acme", "variant": "b"})
        assert http.post("/v1/signals", json=[claimed]).status_code == 202
    (_, key, record) = published(publisher)[0]
    assert key == "ep-1"
    assert record["attrs"] == {"variant": "b"}


def test_the_gateway_token_is_also_accepted_in_x_evalstream_token(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    response = http.post(
        "/v1/signals", json=[signal()], headers={"x-evalstream-token": TOKENS["globex"]}
    )
    assert response.status_code == 202
    assert publisher.records[0].key == "globex/ep-1"


# --- redaction ----------------------------------------------------------------------------

SECRETS = {
    "anthropic": "sk-ant-api03-" + "A1b2C3d4" * 6,
    "openai": "sk-proj-" + "Z9y8X7w6" * 5,
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_" + "a1B2c3D4e5" * 4,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


def test_secrets_are_redacted_before_publishing(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    payload = {
        "headers": {"Authorization": "Bearer abcdefghijklmnop", "X-Api-Key": "plain-secret-value"},
        "note": f"my key is {SECRETS['anthropic']} and {SECRETS['openai']}",
        "env": [f"AWS={SECRETS['aws']}", f"GH={SECRETS['github']}"],
        "token": SECRETS["jwt"],
        "password": "hunter2",
        "env_vars": {"OPENAI_API_KEY": "k-1", "GITHUB_TOKEN": "t-2", "db_password": "p-3"},
        "log": "x-api-key: lineKey42 dsn=postgres://admin:urlpw99@db:5432/app",
        "harmless": {
            "input_tokens": 5,
            "token_count": 7,
            "keyboard": "us",
            "text": "nothing secret here",
        },
    }
    items = [signal(0, payload=payload)]
    llm_call = {
        "id": "c1",
        "episode_id": "e",
        "timestamp": 1,
        "input": {"api_key": "abc123"},
        "output": {"content": f"leaked {SECRETS['anthropic']}"},
    }
    assert http.post("/v1/signals", json=items, headers=bearer("acme")).status_code == 202
    assert http.post("/v1/llm-calls", json=[llm_call], headers=bearer("acme")).status_code == 202
    raw = b"\n".join(r.value for r in publisher.records).decode()
    for secret in [
        *SECRETS.values(),
        "abcdefghijklmnop",
        "plain-secret-value",
        "hunter2",
        "abc123",
        "lineKey42",
        "urlpw99",
    ]:
        assert secret not in raw
    record = orjson.loads(publisher.records[0].value)["payload"]
    assert record["headers"] == {"Authorization": "[REDACTED]", "X-Api-Key": "[REDACTED]"}
    assert record["password"] == "[REDACTED]"
    assert "[REDACTED:anthropic_api_key]" in record["note"]
    assert "[REDACTED:openai_api_key]" in record["note"]
    assert record["env"] == ["AWS=[REDACTED:aws_access_key_id]", "GH=[REDACTED:github_token]"]
    assert set(record["env_vars"].values()) == {"[REDACTED]"}
    assert record["log"] == (
        "x-api-key: [REDACTED:secret_assignment] "
        "dsn=postgres://admin:[REDACTED:url_password]@db:5432/app"
    )
    assert record["token"] == "[REDACTED]"  # a key named token: replaced whole
    assert record["harmless"] == payload["harmless"]
    metrics = http.get("/metrics").text
    assert 'evalstream_gateway_redactions_total{kind="anthropic_api_key"} 2.0' in metrics


# --- LiteLLM and episodes -----------------------------------------------------------------


def litellm_payload(n: int, **extra: JSON) -> dict[str, JSON]:
    payload: dict[str, JSON] = {
        "id": f"chatcmpl-{n}",
        "trace_id": "trace-1",
        "call_type": "acompletion",
        "stream": False,
        "response_cost": 0.00042,
        "status": "success",
        "custom_llm_provider": "anthropic",
        "total_tokens": 30,
        "prompt_tokens": 20,
        "completion_tokens": 10,
        "startTime": 1_700_000_000.25,
        "endTime": 1_700_000_001.5,
        "completionStartTime": 1_700_000_000.75,
        "model": "claude-haiku-4-5",
        "api_base": "https://api.anthropic.com",
        "metadata": {"user_api_key_hash": "abc", "requester_metadata": {"episode_id": "lite-1"}},
        "messages": [{"role": "user", "content": "weather?"}],
        "response": {
            "id": "x",
            "choices": [
                {
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": "checking",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                            }
                        ],
                    },
                }
            ],
        },
        "error_str": None,
    }
    payload.update(extra)
    return payload


def test_litellm_generic_api_payloads_become_llm_call_records(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    failure = litellm_payload(
        2,
        status="failure",
        error_str="RateLimitError: slow down",
        error_information={"error_code": "429", "error_class": "RateLimitError"},
        response=None,
    )
    response = http.post("/v1/litellm", json=[litellm_payload(1), failure], headers=bearer("acme"))
    assert response.status_code == 202, response.text
    (s1, k1, ok), (_, _, bad) = published(publisher)
    assert (s1, k1) == ("llm-calls", "acme/lite-1")
    assert ok["id"] == "litellm:chatcmpl-1"
    assert ok["timestamp"] == 1_700_000_000_250.0
    assert ok["durationMs"] == pytest.approx(1250.0)
    assert ok["costUsd"] == 0.00042
    assert ok["stopReason"] == "tool_calls"
    assert ok["output"] == {
        "content": "checking",
        "toolCalls": [{"id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}],
        "usage": {"inputTokens": 20, "outputTokens": 10, "totalTokens": 30},
    }
    assert (bad["status"], bad["error"], bad["code"]) == (
        "error",
        "RateLimitError: slow down",
        "429",
    )


def test_a_bad_litellm_payload_is_refused(client: tuple[TestClient, MemoryPublisher]) -> None:
    http, publisher = client
    response = http.post(
        "/v1/litellm", json=[litellm_payload(1, startTime="soon")], headers=bearer("acme")
    )
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["reason"] == "bad_litellm_payload"
    assert publisher.records == []


def store_episode() -> dict[str, JSON]:
    return {
        "episode_id": "6f1c2d3e-0000-4000-8000-000000000001",
        "agent_id": "support-bot",
        "status": "success",
        "started_at": "2026-01-01T10:00:00Z",
        "ended_at": "2026-01-01T10:00:05Z",
        "metadata": {"case_id": "refund", "tenant": "someone-else"},
        "steps": [
            {
                "step_index": 0,
                "step_type": "llm_call",
                "model": "claude-sonnet-4-5",
                "provider": "anthropic",
                "input_summary": "refund?",
                "output_summary": "call lookup",
                "tokens": 120,
                "cost_usd": 0.002,
                "duration_ms": 900,
                "timestamp": "2026-01-01T10:00:00.100Z",
            },
            {
                "step_index": 1,
                "step_type": "tool_call",
                "tool_name": "lookup_order",
                "input_summary": "order 42",
                "duration_ms": 200,
                "timestamp": "2026-01-01T10:00:01Z",
            },
        ],
        "total_cost_usd": 0.002,
    }


def test_store_episodes_become_tenant_stamped_signals(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    response = http.post("/v1/episodes", json=store_episode(), headers=bearer("globex"))
    assert response.status_code == 202, response.text
    out = published(publisher)
    names = [record["name"] for _, _, record in out]
    assert names == [
        "harness:start",
        "agent:activated",
        "provider:start",
        "provider:end",
        "tool:call",
        "agent:completed",
        "harness:end",
    ]
    key = "globex/6f1c2d3e-0000-4000-8000-000000000001"
    assert {k for _, k, _ in out} == {key}
    assert out[0][2]["attrs"]["tenant"] == "globex"  # not the one in the episode's metadata
    assert out[0][2]["attrs"]["case_id"] == "refund"
    assert out[3][2]["payload"]["costUsd"] == 0.002


def test_a_bad_store_episode_is_refused_with_its_reason(
    client: tuple[TestClient, MemoryPublisher],
) -> None:
    http, publisher = client
    episode = store_episode()
    episode["status"] = "exploded"
    response = http.post("/v1/episodes", json=[episode], headers=bearer("acme"))
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_episode"
    assert response.json()["error"]["details"][0]["reason"] == "bad_field"
    assert publisher.records == []


def test_openapi_describes_every_endpoint(client: tuple[TestClient, MemoryPublisher]) -> None:
    http, _ = client
    spec = http.get("/openapi.json").json()
    paths = set(spec["paths"])
    assert {
        "/v1/signals",
        "/v1/llm-calls",
        "/v1/episodes",
        "/v1/traces",
        "/v1/litellm",
        "/v1/messages",
        "/healthz",
        "/readyz",
        "/metrics",
    } <= paths
    signals = spec["paths"]["/v1/signals"]["post"]
    assert set(signals["requestBody"]["content"]) == {"application/json", "application/x-ndjson"}
    assert {"202", "401", "413", "422", "503"} <= set(signals["responses"])
    assert json.dumps(spec)  # serialisable as served
