"""The `evalstream gateway` command against the real broker: every endpoint with a real
client, messages read back with aiokafka and kcat and checked field by field, the worker
evaluating what the gateway ingested, and 503s when the broker cannot secure the data."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest
from anthropic.types import ToolUseBlock
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from starlette.testclient import TestClient

from evalstream.assertions.suite_format.suites import load_suite
from evalstream.connectors.gateway import GatewaySettings, KafkaPublisher, create_gateway_app
from evalstream.connectors.gateway.auth import stored_form
from evalstream.stream.dev_kafka import KafkaBroker
from evalstream.stream.offline import check_files
from evalstream.stream.pipeline import Envelope, MemorySink, Pipeline
from tests.gateway.live import (
    TOKENS,
    Message,
    bearer,
    create_topics,
    kcat,
    read_key_sync,
    read_topic_sync,
    token_env,
)
from tests.kafka.helpers import Deployment, by_episode, consume, without_key
from tests.support.messages_api import MessagesAPIServer, Reply
from tests.support.ports import free_port

pytestmark = pytest.mark.kafka
JSON = Any
EXE = Path(sys.executable).parent / "evalstream"
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "code-review"
API_KEY = "sk-ant-api03-kafka-test-" + "K" * 40


@dataclass
class RunningGateway:
    url: str
    prefix: str
    bootstrap: str
    log: Path
    upstream: MessagesAPIServer

    def topic(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def read(self, name: str, until: int) -> list[Message]:
        return read_topic_sync(self.bootstrap, self.topic(name), until=until, timeout=30)

    def episode(self, key: str, count: int, name: str = "signals") -> list[Message]:
        return read_key_sync(self.bootstrap, self.topic(name), key, count=count)


def start_gateway(
    bootstrap: str, prefix: str, workdir: Path, upstream: MessagesAPIServer
) -> tuple[subprocess.Popen[bytes], RunningGateway]:
    tokens = workdir / "tokens.yaml"
    tokens.write_text(
        "tenants:\n" + "".join(f"  {t}:\n    - {stored_form(tok)}\n" for t, tok in TOKENS.items()),
        "utf-8",
    )
    port = free_port()
    log = workdir / "gateway.log"
    env = {
        **os.environ,
        "EVALSTREAM_BROKER": bootstrap,
        "EVALSTREAM_TOPIC_PREFIX": prefix,
        "EVALSTREAM_GATEWAY_ANTHROPIC_UPSTREAM": upstream.base_url,
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(EXE), "gateway", "--port", str(port), "--tokens-file", str(tokens)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the gateway did not become ready:\n{log.read_text()}")
        time.sleep(0.2)
    return proc, RunningGateway(url, prefix, bootstrap, log, upstream)


@pytest.fixture(scope="module")
def gateway(
    kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    prefix = f"gw{os.getpid()}{int(time.time())}."
    names = [f"{prefix}{n}" for n in ("signals", "llm-calls")]
    asyncio.run(create_topics(kafka_broker.bootstrap, names, 4))
    with MessagesAPIServer() as upstream:
        proc, running = start_gateway(
            kafka_broker.bootstrap, prefix, tmp_path_factory.mktemp("gateway"), upstream
        )
        try:
            yield running
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def post(
    gw: RunningGateway, path: str, body: bytes, tenant: str = "acme", **headers: str
) -> httpx.Response:
    return httpx.post(
        gw.url + path,
        content=body,
        headers={**bearer(tenant), "content-type": "application/x-ndjson", **headers},
        timeout=30,
    )


def by_id(messages: list[Message]) -> dict[str, Message]:
    return {m.value["id"]: m for m in messages}


def test_signals_reach_the_broker_field_by_field(gateway: RunningGateway) -> None:
    lines = EXAMPLE.joinpath("episodes.jsonl").read_bytes().splitlines()[:100]
    sent = [json.loads(line) for line in lines]
    response = post(gateway, "/v1/signals", b"\n".join(lines))
    assert response.status_code == 202, response.text
    assert response.json()["accepted"] == len(sent)
    got = by_id(gateway.read("signals", until=len(sent)))
    partitions: dict[str, set[int]] = {}
    for signal in sent:
        message = got[signal["id"]]
        scoped = f"acme/{signal['episode_id']}"
        assert message.key == scoped
        expected = {
            **signal,
            "episode_id": scoped,
            "attrs": {**signal.get("attrs", {}), "tenant": "acme"},
        }
        assert message.value == expected
        partitions.setdefault(scoped, set()).add(message.partition)
    assert all(len(p) == 1 for p in partitions.values())  # one episode, one partition
    # kcat (librdkafka) reads the same records
    from_kcat = {
        value["id"]: (key, value)
        for key, value in kcat(gateway.bootstrap, gateway.topic("signals"))
    }
    for signal_id, message in got.items():
        assert from_kcat[signal_id] == (message.key, message.value)


def test_llm_calls_litellm_and_episodes_reach_the_broker(gateway: RunningGateway) -> None:
    air = {
        "version": "1",
        "run_id": "air-run-1",
        "trace_id": "tr",
        "timestamp": "2026-02-01T00:00:00Z",
        "model": "gpt-4o",
        "provider": "openai",
        "endpoint": "/v1/chat/completions",
        "tokens": {"prompt": 10, "completion": 5, "total": 15},
        "duration_ms": 300,
        "status": "success",
    }
    assert (
        post(
            gateway,
            "/v1/llm-calls",
            orjson.dumps(air),
            "globex",
            **{"X-Evalstream-Episode": "air-ep"},
        ).status_code
        == 202
    )
    litellm = {
        "id": "lite-call-1",
        "trace_id": "lt",
        "status": "success",
        "model": "claude-haiku-4-5",
        "custom_llm_provider": "anthropic",
        "startTime": 1_760_000_000.0,
        "endTime": 1_760_000_000.5,
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 7,
        "response_cost": 0.0001,
        "metadata": {"spend_logs_metadata": {"episode_id": "lite-ep"}},
        "response": {"choices": [{"finish_reason": "stop", "message": {"content": "hey"}}]},
    }
    response = post(
        gateway,
        "/v1/litellm",
        orjson.dumps([litellm]),
        "globex",
        **{"content-type": "application/json"},
    )
    assert response.status_code == 202, response.text
    calls = {m.value.get("id") or m.value["run_id"]: m for m in gateway.read("llm-calls", until=2)}
    assert calls["air-run-1"].key == "globex/air-ep"
    assert calls["air-run-1"].value == {
        **air,
        "episode_id": "globex/air-ep",
        "attrs": {"tenant": "globex"},
    }
    lite = calls["litellm:lite-call-1"]
    assert lite.key == "globex/lite-ep"
    assert lite.value["output"]["content"] == "hey"
    assert lite.value["costUsd"] == 0.0001
    episode = {
        "episode_id": "store-1",
        "agent_id": "bot",
        "status": "failure",
        "started_at": "2026-02-01T00:00:00Z",
        "ended_at": "2026-02-01T00:00:02Z",
        "steps": [{"step_index": 0, "step_type": "error", "error": "boom", "duration_ms": 5}],
    }
    assert post(gateway, "/v1/episodes", orjson.dumps(episode), "globex").status_code == 202
    store = gateway.episode("globex/store-1", 5)
    assert [m.value["name"] for m in store] == [
        "harness:start",
        "agent:activated",
        "agent:error",
        "agent:stopped",
        "harness:end",
    ]


def test_otlp_spans_from_the_sdk_reach_the_broker(gateway: RunningGateway) -> None:
    provider = TracerProvider()
    exporter = OTLPSpanExporter(
        endpoint=f"{gateway.url}/v1/traces",
        headers={"authorization": f"Bearer {TOKENS['acme']}"},
        compression=Compression.Gzip,
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("kafka-test")
    with tracer.start_as_current_span(
        "chat",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": "otel-ep",
            "gen_ai.request.model": "claude-haiku-4-5",
            "gen_ai.usage.input_tokens": 9,
        },
    ) as span:
        span_id = format(span.get_span_context().span_id, "016x")
    assert provider.force_flush()
    provider.shutdown()
    found = gateway.episode("acme/otel-ep", 2)
    assert [m.value["name"] for m in found] == ["provider:start", "provider:end"]
    assert found[0].value["id"].endswith(f"{span_id}:start")
    assert found[1].value["payload"]["output"]["usage"]["inputTokens"] == 9
    assert found[0].value["attrs"] == {"tenant": "acme"}


def test_proxied_calls_are_recorded_in_the_broker(gateway: RunningGateway) -> None:
    gateway.upstream.enqueue(Reply.tool_use("search", {"q": "kafka"}), Reply.text("done"))
    with anthropic.Anthropic(
        base_url=gateway.url,
        api_key=API_KEY,
        default_headers={"X-Evalstream-Token": TOKENS["acme"], "X-Evalstream-Episode": "px-ep"},
    ) as client:
        first = client.messages.create(
            model="claude-haiku-4-5", max_tokens=20, messages=[{"role": "user", "content": "q"}]
        )
        with client.messages.stream(
            model="claude-haiku-4-5", max_tokens=20, messages=[{"role": "user", "content": "q"}]
        ) as stream:
            stream.until_done()
    records = [m.value for m in gateway.episode("acme/px-ep", 5)]
    assert [r["name"] for r in records] == [
        "provider:start",
        "provider:end",
        "tool:call",
        "provider:start",
        "provider:end",
    ]
    called = first.content[0]
    assert isinstance(called, ToolUseBlock)
    assert records[2]["payload"] == {
        "id": called.id,
        "name": "search",
        "input": {"q": "kafka"},
    }
    assert records[4]["payload"]["output"]["content"] == "done"
    assert records[4]["payload"]["costUsd"] > 0
    raw = json.dumps(records)
    assert API_KEY not in raw
    assert API_KEY not in gateway.log.read_text()


def test_the_worker_evaluates_what_the_gateway_ingested(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    deployment = Deployment(
        kafka_broker.bootstrap, tmp_path, [str(EXAMPLE / "suite.yaml")], partitions=4
    )
    deployment.create_topics()
    with MessagesAPIServer() as upstream:
        proc, gw = start_gateway(kafka_broker.bootstrap, deployment.prefix, tmp_path, upstream)
        try:
            deployment.start_worker("w1")
            body = EXAMPLE.joinpath("episodes.jsonl").read_bytes()
            assert post(gw, "/v1/signals", body, "globex").status_code == 202
            expected = check_files(
                [str(EXAMPLE / "episodes.jsonl")], [load_suite(EXAMPLE / "suite.yaml")]
            )
            episodes = asyncio.run(
                consume(
                    kafka_broker.bootstrap,
                    deployment.topic("episodes"),
                    until=len(expected.results),
                    timeout=90,
                )
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            deployment.stop_all()
    assert len(episodes) == len(expected.results) > 0, deployment.logs()
    for result in expected.results:
        want = result.to_json()
        got = without_key(by_episode(episodes)[f"globex/{result.episode_id}"][0])
        assert got["attrs"].pop("tenant") == "globex"
        assert {**got, "episode_id": result.episode_id} == want


def test_the_pipeline_accepts_every_record_the_gateway_published(gateway: RunningGateway) -> None:
    sink = MemorySink()
    pipeline = Pipeline(
        [], sink, require_key=True, llm_topics=frozenset({gateway.topic("llm-calls")})
    )

    async def feed() -> int:
        count = 0
        for name in ("signals", "llm-calls"):
            for message in await read_all(gateway.bootstrap, gateway.topic(name)):
                await pipeline.handle(
                    Envelope(gateway.topic(name), message.raw, message.key.encode())
                )
                count += 1
        return count

    assert asyncio.run(feed()) > 100
    assert sink.records["dlq"] == []


async def read_all(bootstrap: str, topic: str) -> list[Message]:
    from tests.gateway.live import read_topic  # noqa: PLC0415

    return await read_topic(bootstrap, topic, until=10**9, timeout=1.5)


def test_an_unreachable_broker_gives_503_and_not_ready() -> None:
    publisher = KafkaPublisher(f"127.0.0.1:{free_port()}", lambda s: f"x.{s}", publish_timeout_s=1)
    app = create_gateway_app(GatewaySettings(tokens=token_env()), publisher)
    with TestClient(app) as http:
        response = http.post(
            "/v1/signals",
            json=[{"episode_id": "e", "name": "n", "timestamp": 1}],
            headers=bearer("acme"),
        )
        assert response.status_code == 503
        assert response.headers["retry-after"] == "2"
        assert response.json()["error"]["code"] == "broker_unreachable"
        assert http.get("/readyz").status_code == 503


def test_a_full_buffer_gives_503(kafka_broker: KafkaBroker) -> None:
    publisher = KafkaPublisher(kafka_broker.bootstrap, lambda s: f"unused.{s}", buffer_bytes=1024)
    app = create_gateway_app(GatewaySettings(tokens=token_env()), publisher)
    big = [
        {"episode_id": "e", "name": "n", "timestamp": i, "payload": "x" * 100} for i in range(20)
    ]
    with TestClient(app) as http:
        response = http.post("/v1/signals", json=big, headers=bearer("acme"))
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "buffer_full"


def test_a_broker_that_goes_away_gives_503_within_the_publish_timeout(tmp_path: Path) -> None:
    with KafkaBroker() as broker:
        asyncio.run(create_topics(broker.bootstrap, ["gone.signals"], 1))
        publisher = KafkaPublisher(broker.bootstrap, lambda s: f"gone.{s}", publish_timeout_s=2)
        app = create_gateway_app(GatewaySettings(tokens=token_env()), publisher)
        with TestClient(app) as http:
            signal = {"episode_id": "e", "name": "n", "timestamp": 1}
            assert (
                http.post("/v1/signals", json=[signal], headers=bearer("acme")).status_code == 202
            )
            broker.stop()
            response = http.post("/v1/signals", json=[signal], headers=bearer("acme"))
            assert response.status_code == 503
            assert response.json()["error"]["code"] in ("broker_timeout", "broker_error")
            assert response.headers["retry-after"] == "2"
