"""The Kafka worker against the real broker: same results as check, dead letters, duplicates."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalstream.assertions.suite_format.suites import load_suite
from evalstream.stream.dev_kafka import KafkaBroker
from evalstream.stream.offline import check_files
from tests.kafka.helpers import (
    EXE,
    Deployment,
    by_episode,
    consume,
    consume_raw,
    jsonl_records,
    produce,
    without_key,
)

pytestmark = pytest.mark.kafka
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.parent for p in (REPO / "examples").glob("*/suite.yaml"))


@pytest.fixture
def deployment(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[Deployment]:
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(p / "suite.yaml") for p in EXAMPLES])
    dep.create_topics()
    yield dep
    dep.stop_all()


def test_worker_results_equal_check_and_embedded(deployment: Deployment) -> None:
    deployment.start_worker("w1")
    records = [r for example in EXAMPLES for r in jsonl_records(example / "episodes.jsonl")]
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), records))
    expected = check_files(
        [str(e / "episodes.jsonl") for e in EXAMPLES],
        [load_suite(e / "suite.yaml") for e in EXAMPLES],
    )
    episodes = asyncio.run(
        consume(
            deployment.bootstrap,
            deployment.topic("episodes"),
            until=len(expected.results),
            timeout=90,
        )
    )
    assert len(episodes) == len(expected.results) == 40, deployment.logs()
    for result in expected.results:
        deliveries = by_episode(episodes)[result.episode_id]
        assert all(without_key(d) == result.to_json() for d in deliveries), result.episode_id
    verdicts = asyncio.run(
        consume(
            deployment.bootstrap,
            deployment.topic("verdicts"),
            until=sum(len(r.assertions) for r in expected.results),
            timeout=30,
        )
    )
    assert len(verdicts) == sum(len(r.assertions) for r in expected.results)
    early = [v[0] for v in verdicts.values() if v[0]["early"]]
    assert early
    assert all(v["decided_at"] is not None for v in early)


def test_bad_input_goes_to_the_dead_letters_and_the_worker_keeps_going(
    deployment: Deployment,
) -> None:
    deployment.extra_env["EVALSTREAM_MAX_MESSAGE_BYTES"] = "2048"
    deployment.start_worker("w1")
    good = jsonl_records(EXAMPLES[0] / "episodes.jsonl")
    want = len({key for key, _ in good})
    first_episode = good[0][0]
    bad: list[tuple[bytes | None, bytes]] = [
        (b"e-x", b"\xff\xfe\x00 not utf-8"),
        (b"e-x", b"{not json"),
        (b"e-x", b'{"id": "1", "episode_id": "e-x", "timestamp": 1}'),
        (None, b'{"id": "2", "episode_id": "e-y", "name": "a", "timestamp": 1}'),
        (b"e-x", b'{"pad": "' + b"x" * 5000 + b'"}'),  # over the 2 KiB limit set below
    ]
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), [*bad, *good]))
    episodes = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("episodes"), until=want, timeout=90)
    )
    assert len(episodes) == want, deployment.logs()
    # A late signal for an episode that already closed.
    late = {
        "id": "late-1",
        "episode_id": first_episode.decode(),
        "name": "tool:call",
        "timestamp": "2030-01-01T00:00:00Z",
    }
    asyncio.run(
        produce(
            deployment.bootstrap,
            deployment.topic("signals"),
            [(first_episode, json.dumps(late).encode())],
        )
    )
    letters = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("dlq"), until=6, timeout=60)
    )
    by_reason = {d[0]["reason"]: d[0] for d in letters.values()}
    assert set(by_reason) == {
        "undecodable",
        "invalid_json",
        "missing_name",
        "missing_key",
        "oversized",
        "late",
    }
    for reason, letter in by_reason.items():
        assert letter["topic"] == deployment.topic("signals")
        assert letter["partition"] is not None
        assert letter["offset"] is not None
        assert letter["message"], reason
    assert base64.b64decode(by_reason["invalid_json"]["value_b64"]) == b"{not json"
    assert all(w.poll() is None for w in deployment.workers), "the worker must keep running"


def test_duplicate_deliveries_never_produce_a_different_verdict(deployment: Deployment) -> None:
    deployment.start_worker("w1")
    records = jsonl_records(EXAMPLES[1] / "episodes.jsonl")
    doubled = [r for record in records for r in (record, record)]  # every message twice
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), doubled))
    expected = check_files(
        [str(EXAMPLES[1] / "episodes.jsonl")], [load_suite(EXAMPLES[1] / "suite.yaml")]
    )
    episodes = asyncio.run(
        consume(
            deployment.bootstrap,
            deployment.topic("episodes"),
            until=len(expected.results),
            timeout=90,
        )
    )
    assert len(episodes) == len(expected.results), deployment.logs()
    for result in expected.results:
        [record] = {
            json.dumps(without_key(d), sort_keys=True)
            for d in by_episode(episodes)[result.episode_id]
        }
        got = json.loads(record)
        assert got["assertions"] == result.to_json()["assertions"]
        assert got["duplicates"] == result.signals
    verdicts = asyncio.run(
        consume(
            deployment.bootstrap,
            deployment.topic("verdicts"),
            until=sum(len(r.assertions) for r in expected.results),
            timeout=30,
        )
    )
    for deliveries in verdicts.values():
        assert len({json.dumps(d, sort_keys=True) for d in deliveries}) == 1


def test_llm_call_records_join_their_episode(deployment: Deployment) -> None:
    deployment.start_worker("w1")
    start = {
        "id": "h",
        "episode_id": "ep-llm",
        "name": "harness:start",
        "timestamp": "2026-01-01T00:00:00Z",
        "attrs": {"agent_id": "code-gen-agent"},
    }
    call = {
        "id": "call-1", "episode_id": "ep-llm", "timestamp": "2026-01-01T00:00:01Z",
        "durationMs": 500, "model": "claude-sonnet-4-5", "provider": "anthropic",
        "output": {"content": "x", "usage": {"inputTokens": 100000, "outputTokens": 30000}},
    }  # fmt: skip
    end = {
        "id": "z",
        "episode_id": "ep-llm",
        "name": "harness:end",
        "timestamp": "2026-01-01T00:00:03Z",
        "payload": {"output": "def f"},
    }
    asyncio.run(
        produce(
            deployment.bootstrap,
            deployment.topic("signals"),
            [(b"ep-llm", json.dumps(start).encode())],
        )
    )
    asyncio.run(
        produce(
            deployment.bootstrap,
            deployment.topic("llm-calls"),
            [(b"ep-llm", json.dumps(call).encode())],
        )
    )
    # As in real traffic, the call is joined (re-published as provider:* signals into the
    # episode's partition) before the episode ends.
    joined = asyncio.run(
        consume_raw(deployment.bootstrap, deployment.topic("signals"), until=3, timeout=60)
    )
    names = [json.loads(v)["name"] for v in joined]
    assert names == ["harness:start", "provider:start", "provider:end"]
    asyncio.run(
        produce(
            deployment.bootstrap,
            deployment.topic("signals"),
            [(b"ep-llm", json.dumps(end).encode())],
        )
    )
    episodes = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("episodes"), until=1, timeout=60)
    )
    [record] = by_episode(episodes)["ep-llm"][:1]
    assert record["signals"] == 4, (record["signals"], record["close_reason"], record["metrics"])
    assert record["metrics"]["cost_usd"] == pytest.approx(0.75)  # 100k x $3/M + 30k x $15/M
    cost = next(a for a in record["assertions"] if a["type"] == "metric.cost.max")
    assert cost["verdict"] == "fail"


def test_closed_episode_markers_are_pruned_after_their_retention(deployment: Deployment) -> None:
    deployment.extra_env.update(
        {
            "EVALSTREAM_PRUNE_INTERVAL_S": "1",
            "EVALSTREAM_MARKER_RETENTION_S": "0",
            "EVALSTREAM_MAX_DURATION_MS": "1000",
        }
    )
    worker = deployment.start_worker("w1")
    records = jsonl_records(EXAMPLES[2] / "episodes.jsonl")
    want = len({key for key, _ in records})
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), records))
    episodes = asyncio.run(
        consume(deployment.bootstrap, deployment.topic("episodes"), until=want, timeout=90)
    )
    assert len(episodes) == want
    log = deployment.workdir / "w1.log"

    def pruned_so_far() -> int:
        return sum(
            int(n) for n in re.findall(r"pruned (\d+) closed-episode markers", log.read_text())
        )

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and pruned_so_far() < want:
        time.sleep(0.5)
    pruned = pruned_so_far()
    assert pruned == want
    assert worker.poll() is None


def test_up_with_kafka_publishes_the_files_and_runs_the_worker(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """`evalstream up --kafka HOST:PORT … FILES` gives the results `check` gives on FILES."""
    prefix = f"up{uuid.uuid4().hex[:8]}."
    env = {
        **os.environ,
        "EVALSTREAM_APP_ID": prefix.rstrip("."),
        "EVALSTREAM_DATA_DIR": str(tmp_path / "data"),
        "EVALSTREAM_SWEEP_INTERVAL_S": "0.5",
        "EVALSTREAM_PARTITIONS": "4",
    }
    files = [str(e / "episodes.jsonl") for e in EXAMPLES]
    suite_args = [arg for e in EXAMPLES for arg in ("--suite", str(e / "suite.yaml"))]
    log = (tmp_path / "up.log").open("wb")
    proc = subprocess.Popen(
        [str(EXE), "up", "--kafka", kafka_broker.bootstrap, "--topic-prefix", prefix,
         "--metrics-port", "0", "--grace-ms", "300", *suite_args, *files],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        expected = check_files(files, [load_suite(e / "suite.yaml") for e in EXAMPLES])
        episodes = asyncio.run(
            consume(kafka_broker.bootstrap, f"{prefix}episodes", until=40, timeout=120)
        )
        logs = (tmp_path / "up.log").read_text(errors="replace")
        assert len(episodes) == len(expected.results) == 40, logs
        assert "published" in logs
        for result in expected.results:
            deliveries = by_episode(episodes)[result.episode_id]
            assert all(without_key(d) == result.to_json() for d in deliveries), result.episode_id
        assert proc.poll() is None, logs  # the worker keeps running until stopped
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
