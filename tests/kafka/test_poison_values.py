"""Signals with values no episode can hold (timestamps no calendar formats, ids that cannot be
keys, numbers that overflow a sum) against the real broker: each is dead-lettered with its
reason, the worker stays up, and after a restart it does not read them again."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalstream.assertions.suite_format.suites import load_suite
from evalstream.stream.dev_kafka import KafkaBroker
from evalstream.stream.offline import check_files
from tests.kafka.helpers import Deployment, by_episode, consume, jsonl_records, produce, without_key

pytestmark = pytest.mark.kafka
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-review"


@pytest.fixture
def deployment(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[Deployment]:
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(EXAMPLE / "suite.yaml")], partitions=2)
    dep.create_topics()
    yield dep
    dep.stop_all()


def poison_records() -> list[tuple[bytes, bytes, str]]:
    """(key, value, expected dead-letter reason): one ordinary signal bent each way."""
    base = json.loads(jsonl_records(EXAMPLE / "episodes.jsonl")[0][1])

    def bent(episode: str, **changes: object) -> tuple[bytes, bytes]:
        value = {**base, "episode_id": episode, "id": f"{episode}-1", **changes}
        return episode.encode(), json.dumps(value).encode()

    huge_id = "h" * 100_000
    return [
        (*bent("poison-far-future", timestamp=1e308), "timestamp_out_of_range"),
        (*bent("poison-far-past", timestamp=-1e308), "timestamp_out_of_range"),
        (*bent("poison-1e20", timestamp=1e20), "timestamp_out_of_range"),
        (*bent(huge_id), "id_too_long"),
        (*bent("poison\x00nul"), "bad_id_character"),
        (
            *bent(
                "poison-cost",
                name="provider:end",
                payload={"durationMs": 10, "costUsd": 1e300, "usage": {"input_tokens": 1}},
            ),
            "number_out_of_range",
        ),
    ]


def expected_results() -> dict[str, dict[str, object]]:
    report = check_files([str(EXAMPLE / "episodes.jsonl")], [load_suite(EXAMPLE / "suite.yaml")])
    return {r.episode_id: r.to_json() for r in report.results}


def test_poison_values_are_dead_lettered_and_never_read_again(deployment: Deployment) -> None:
    bootstrap = deployment.bootstrap
    signals, dlq, episodes = (deployment.topic(t) for t in ("signals", "dlq", "episodes"))
    poison = poison_records()
    good = jsonl_records(EXAMPLE / "episodes.jsonl")
    expected = expected_results()
    worker = deployment.start_worker("w1")

    # The poison first, then ordinary traffic on the same partitions.
    asyncio.run(produce(bootstrap, signals, [(key, value) for key, value, _ in poison]))
    asyncio.run(produce(bootstrap, signals, good))
    letters = asyncio.run(consume(bootstrap, dlq, until=len(poison), timeout=90))
    assert len(letters) == len(poison), deployment.logs()
    reasons = sorted(str(d[0]["reason"]) for d in letters.values())
    assert reasons == sorted(reason for _, _, reason in poison)
    for deliveries in letters.values():
        assert deliveries[0]["message"], "each letter says what was wrong and how to fix it"

    reported = by_episode(
        asyncio.run(consume(bootstrap, episodes, until=len(expected), timeout=120))
    )
    assert set(reported) == set(expected), deployment.logs()
    for episode_id, deliveries in reported.items():
        assert without_key(deliveries[0]) == expected[episode_id]
    assert worker.poll() is None, "the worker is still running"

    # A restarted worker resumes after the poison: no second dead letter, no crash loop.
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, deployment.logs()
    worker = deployment.start_worker("w2")
    first = good[0][0]
    again = [
        (key + b"@again", value.replace(b'"' + key + b'"', b'"' + key + b'@again"'))
        for key, value in good
        if key == first
    ]
    asyncio.run(produce(bootstrap, signals, again))
    after = asyncio.run(consume(bootstrap, episodes, until=len(expected) + 1, timeout=120))
    assert any(r[0]["episode_id"] == again[0][0].decode() for r in after.values()), (
        deployment.logs()
    )
    letters_after = asyncio.run(consume(bootstrap, dlq, until=len(poison) + 1, timeout=5))
    assert len(letters_after) == len(poison)
    assert worker.poll() is None
