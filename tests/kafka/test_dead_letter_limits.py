"""Dead letters against the real broker: they always fit its message limit, and one the
broker refuses anyway is counted and given up, never a crash loop."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from evalstream.stream.dev_kafka import KafkaBroker
from tests.kafka.helpers import Deployment, consume, jsonl_records, produce
from tests.support.ports import free_port

pytestmark = pytest.mark.kafka
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-review"
BROKER_LIMIT = 1_048_588  # Kafka's default message.max.bytes, which the test broker keeps


@pytest.fixture
def deployment(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[Deployment]:
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(EXAMPLE / "suite.yaml")], partitions=2)
    dep.extra_env["EVALSTREAM_METRICS_PORT"] = str(free_port())
    dep.create_topics()
    yield dep
    dep.stop_all()


def metric(dep: Deployment, name: str, labels: str) -> float | None:
    port = dep.extra_env["EVALSTREAM_METRICS_PORT"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def wait_for_metric(dep: Deployment, name: str, labels: str, want: float) -> float | None:
    deadline = time.monotonic() + 60
    value = None
    while time.monotonic() < deadline:
        try:
            value = metric(dep, name, labels)
        except OSError:
            value = None
        if value == want:
            return value
        time.sleep(0.5)
    return value


def test_a_poison_message_near_the_limit_is_dead_lettered_truncated(deployment: Deployment) -> None:
    """~900 KB of non-signal JSON: base64 would make its dead letter ~1.2 MB, over the broker's
    1 MB. It goes out truncated, with size and hash, and the worker goes on evaluating."""
    poison = b'{"pad": "' + b"x" * 900_000 + b'"}'
    deployment.start_worker("w1")
    good = jsonl_records(EXAMPLE / "episodes.jsonl")
    want = len({key for key, _ in good})
    asyncio.run(
        produce(deployment.bootstrap, deployment.topic("signals"), [(b"ep-poison", poison)])
    )
    # The same on the LLM-call path (the worker's faust agent): not JSON, ~900 KB.
    llm_poison = b"{" + b"z" * 900_000
    asyncio.run(
        produce(deployment.bootstrap, deployment.topic("llm-calls"), [(b"ep-llm", llm_poison)])
    )
    letters = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("dlq"), until=2, timeout=60)
    )
    by_topic = {d[0]["topic"]: d[0] for d in letters.values()}
    llm_letter = by_topic[deployment.topic("llm-calls")]
    assert llm_letter["reason"] == "invalid_json"
    assert llm_letter["value_size"] == len(llm_poison)
    assert llm_poison.startswith(base64.b64decode(llm_letter["value_b64"]))
    letter = by_topic[deployment.topic("signals")]
    assert letter["reason"] == "missing_name"
    assert letter["value_truncated"] is True
    assert letter["value_size"] == len(poison)
    assert letter["value_sha256"] == hashlib.sha256(poison).hexdigest()
    kept = base64.b64decode(letter["value_b64"])
    assert 500_000 < len(kept) < len(poison)
    assert poison.startswith(kept)
    assert len(json.dumps(letter)) < BROKER_LIMIT
    # A later, ordinary episode is still evaluated by the same, living worker.
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), good))
    episodes = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("episodes"), until=want, timeout=90)
    )
    assert len(episodes) == want, deployment.logs()
    assert all(w.poll() is None for w in deployment.workers), deployment.logs()
    assert wait_for_metric(
        deployment, "evalstream_signals_rejected_total", 'reason="missing_name"', 1.0
    )
    assert metric(deployment, "evalstream_dead_letter_failures_total", 'reason="missing_name"') in (
        None,
        0.0,
    )


async def set_topic_limit(bootstrap: str, topic: str, limit: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": str(limit)})]
        )
    finally:
        await admin.close()


def test_a_dead_letter_the_broker_refuses_is_counted_and_the_partition_moves_on(
    deployment: Deployment,
) -> None:
    """The dead-letter topic's limit is lowered under a running worker: the next dead letter
    is refused by the broker. It is counted and logged once; the worker does not crash and
    later episodes of the same partition are evaluated."""
    deployment.start_worker("w1")
    good = jsonl_records(EXAMPLE / "episodes.jsonl")
    first, rest = good[:1], good[1:]
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), first))
    opened = wait_for_metric(
        deployment,
        "evalstream_signals_consumed_total",
        f'source="{deployment.topic("signals")}"',
        1.0,
    )
    assert opened == 1.0, deployment.logs()  # the worker runs, with the limit read at start
    asyncio.run(set_topic_limit(deployment.bootstrap, deployment.topic("dlq"), 20_000))
    bad = (first[0][0], b'{"pad": "' + b"y" * 50_000 + b'"}')  # same key: same partition
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), [bad, *rest]))
    failures = wait_for_metric(
        deployment, "evalstream_dead_letter_failures_total", 'reason="missing_name"', 1.0
    )
    assert failures == 1.0, deployment.logs()
    want = len({key for key, _ in good})
    episodes = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("episodes"), until=want, timeout=90)
    )
    assert len(episodes) == want, deployment.logs()
    assert all(w.poll() is None for w in deployment.workers), deployment.logs()
    logs = deployment.logs()
    assert logs.count("dead letter not published and given up") == 1, logs
    assert "reason missing_name" in logs
