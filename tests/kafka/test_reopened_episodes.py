"""An episode id that opens again after the worker forgot its close (marker pruned, worker
restarted) is a second episode: its records get their own dedupe keys, never the first's."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalstream.stream.dev_kafka import KafkaBroker
from tests.kafka.helpers import Deployment, consume, jsonl_records, produce

pytestmark = pytest.mark.kafka
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-review"


@pytest.fixture
def deployment(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[Deployment]:
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(EXAMPLE / "suite.yaml")], partitions=2)
    dep.extra_env.update(
        {
            "EVALSTREAM_PRUNE_INTERVAL_S": "1",
            "EVALSTREAM_MARKER_RETENTION_S": "0",
            "EVALSTREAM_MAX_DURATION_MS": "1000",
        }
    )
    dep.create_topics()
    yield dep
    dep.stop_all()


def second_instance(records: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The same episode id again, with new signal ids and one signal fewer (another record)."""
    out = []
    for key, value in records[:-2] + records[-1:]:
        obj = json.loads(value)
        obj["id"] = obj["id"] + "-again"
        out.append((key, json.dumps(obj).encode()))
    return out


def test_a_reopened_episode_id_gets_its_own_dedupe_keys(deployment: Deployment) -> None:
    records = jsonl_records(EXAMPLE / "episodes.jsonl")
    episode = records[0][0]
    first = [r for r in records if r[0] == episode]
    worker = deployment.start_worker("w1")
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), first))
    once = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("episodes"), until=1, timeout=90)
    )
    assert len(once) == 1, deployment.logs()
    log = deployment.workdir / "w1.log"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not re.search(
        r"pruned \d+ closed-episode", log.read_text()
    ):
        time.sleep(0.5)
    assert re.search(r"pruned \d+ closed-episode", log.read_text()), deployment.logs()
    worker.terminate()  # the close is forgotten: marker pruned, memory gone with the process
    worker.wait(timeout=30)
    deployment.start_worker("w2")
    again = second_instance(first)
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), again))
    twice = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("episodes"), until=2, timeout=90)
    )
    assert len(twice) == 2, deployment.logs()  # two dedupe keys
    records_by_key = {key: deliveries[0] for key, deliveries in twice.items()}
    assert {r["episode_id"] for r in records_by_key.values()} == {episode.decode()}
    assert sorted(r["signals"] for r in records_by_key.values()) == [len(again), len(first)]
    for key, deliveries in twice.items():  # re-deliveries of one instance are identical
        assert all(d == deliveries[0] for d in deliveries), key
    first_id = json.loads(first[0][1])["id"]
    assert set(twice) == {f"{episode.decode()}@{first_id}", f"{episode.decode()}@{first_id}-again"}
    verdicts = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("verdicts"), until=10**6, timeout=10)
    )
    instances = {key.split("/")[0] for key in verdicts}
    assert instances == set(twice)
