"""A real worker's start-up: a log without false alarms, and a signals topic whose retention
an open episode could outlive refused with the fix."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from evalstream.stream.dev_kafka import KafkaBroker
from tests.kafka.helpers import EXE, Deployment, consume, jsonl_records, produce

pytestmark = pytest.mark.kafka
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "debugging"


@pytest.fixture
def deployment(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[Deployment]:
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(EXAMPLE / "suite.yaml")])
    yield dep
    dep.stop_all()


def test_a_worker_start_logs_no_error(deployment: Deployment) -> None:
    """aiokafka logs the retried coordinator lookup of a new group as an ERROR; the worker's
    log keeps it out while the coordinator is being discovered."""
    deployment.create_topics()
    deployment.start_worker("w1")
    records = jsonl_records(EXAMPLE / "episodes.jsonl")
    want = len({key for key, _ in records})
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), records))
    episodes = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("episodes"), until=want, timeout=90)
    )
    assert len(episodes) == want, deployment.logs()
    deployment.stop_all()
    log = (deployment.workdir / "w1.log").read_text()
    assert "[ERROR]" not in log, log
    assert "Group Coordinator Request failed" not in log
    assert "Marking the coordinator dead" not in log


async def create_signals_topic(
    bootstrap: str, topic: str, partitions: int, retention_ms: int
) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(topic, partitions, 1, topic_configs={"retention.ms": str(retention_ms)})]
        )
    finally:
        await admin.close()


def test_a_retention_shorter_than_the_maximum_episode_is_refused(deployment: Deployment) -> None:
    one_hour, six_hours = 3_600_000, 6 * 3_600_000
    asyncio.run(
        create_signals_topic(
            deployment.bootstrap, deployment.topic("signals"), deployment.partitions, one_hour
        )
    )
    env = {**deployment.env(), "EVALSTREAM_DATA_DIR": str(deployment.workdir / "w")}
    proc = subprocess.run(
        [str(EXE), "worker"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert f"retention.ms={one_hour}" in proc.stderr
    assert f"max_duration_ms={six_hours}" in proc.stderr
    assert f"--add-config retention.ms={2 * six_hours}" in proc.stderr
    assert "Traceback" not in proc.stderr
    # With a maximum duration under the retention, the same topic is accepted.
    deployment.extra_env["EVALSTREAM_MAX_DURATION_MS"] = str(one_hour // 2)
    deployment.start_worker("w1")
    records = jsonl_records(EXAMPLE / "episodes.jsonl")
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), records))
    got = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("episodes"), until=1, timeout=90)
    )
    assert got, deployment.logs()
