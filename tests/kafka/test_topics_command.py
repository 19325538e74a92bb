"""`evalstream topics` creates every topic with the configured partitions, idempotently."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from evalstream.stream.dev_kafka import KafkaBroker

pytestmark = pytest.mark.kafka
EXE = Path(sys.executable).parent / "evalstream"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


async def partition_counts(bootstrap: str, topics: list[str]) -> dict[str, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return {d["topic"]: len(d["partitions"]) for d in await admin.describe_topics(topics)}
    finally:
        await admin.close()


def test_topics_are_created_once_and_verified(kafka_broker: KafkaBroker) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}."
    env = {"EVALSTREAM_BROKER": kafka_broker.bootstrap, "EVALSTREAM_TOPIC_PREFIX": prefix}
    first = run("topics", "--partitions", "3", env=env)
    assert first.returncode == 0, first.stderr
    names = [
        f"{prefix}{n}" for n in ("signals", "llm-calls", "verdicts", "episodes", "alerts", "dlq")
    ]
    assert asyncio.run(partition_counts(kafka_broker.bootstrap, names)) == dict.fromkeys(names, 3)
    again = run("topics", "--partitions", "3", env=env)
    assert again.returncode == 0, again.stderr
    mismatch = run("topics", "--partitions", "5", env=env)
    assert mismatch.returncode == 2
    assert "has 3 partitions but 5 are configured" in mismatch.stderr
    assert "Traceback" not in mismatch.stderr


def test_unreachable_broker_is_a_clear_error() -> None:
    proc = run("topics", "--broker", "127.0.0.1:1", env={})
    assert proc.returncode == 2
    assert "cannot reach Kafka at 127.0.0.1:1" in proc.stderr
