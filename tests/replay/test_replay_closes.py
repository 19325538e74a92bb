"""`replay --into topic` with its defaults: the replayed episodes close where the originals
did, those that timed out included, and a signal that was late stays late."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalstream.stream.dev_kafka import KafkaBroker
from tests.kafka.helpers import (
    Deployment,
    by_episode,
    consume,
    halves,
    jsonl_records,
    produce,
)
from tests.replay.helpers import REPO, cli, read_recording
from tests.replay.test_worker_replay import renamed_back

pytestmark = pytest.mark.kafka
EXAMPLES = [REPO / "examples" / name for name in ("code-review", "debugging")]
SUITES = [str(e / "suite.yaml") for e in EXAMPLES]
INACTIVITY_MS = 3_000
PAUSE_S = 1.5  # within an episode: well under the inactivity


@pytest.fixture
def deployments(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[list[Deployment]]:
    made: list[Deployment] = []
    for name in ("original", "replay"):
        (tmp_path / name).mkdir()
        dep = Deployment(
            kafka_broker.bootstrap,
            tmp_path / name,
            SUITES,
            partitions=4,
            extra_env={"EVALSTREAM_INACTIVITY_MS": str(INACTIVITY_MS)},
        )
        dep.create_topics()
        made.append(dep)
    yield made
    for dep in made:
        dep.stop_all()


def unfinished(path: Path, suffix: str) -> list[tuple[bytes, bytes]]:
    """The episodes of a file without their end signal, under new ids: they time out."""
    out = []
    for _, value in jsonl_records(path):
        signal = json.loads(value)
        if signal["name"] != "harness:end":
            signal["episode_id"] += suffix
            out.append((signal["episode_id"].encode(), json.dumps(signal).encode()))
    return out


@pytest.mark.parametrize("pace", [[], ["--speed", "1"]], ids=["fastest", "original-pace"])
def test_a_default_topic_replay_closes_episodes_where_the_originals_did(
    deployments: list[Deployment], tmp_path: Path, pace: list[str]
) -> None:
    """Default timestamps (`original`): at full speed, and at the original pace (with the
    recorded timestamps now older than the inactivity, a worker timing episodes by them
    closed every one early)."""
    original, second = deployments
    bootstrap = original.bootstrap
    ended = [r for e in EXAMPLES for r in jsonl_records(e / "episodes.jsonl")]
    timing_out = unfinished(EXAMPLES[1] / "episodes.jsonl", "@open")
    episodes_n = len({key for key, _ in ended + timing_out})
    original.start_worker("w1")
    # Each episode's signals come in two parts, a pause apart (shorter than the inactivity).
    first_part, second_part = halves(ended + timing_out)
    asyncio.run(produce(bootstrap, original.topic("signals"), first_part))
    time.sleep(PAUSE_S)
    asyncio.run(produce(bootstrap, original.topic("signals"), second_part))
    first = by_episode(
        asyncio.run(consume(bootstrap, original.topic("episodes"), until=episodes_n, timeout=120))
    )
    assert len(first) == episodes_n, original.logs()
    reasons = {d[0]["close_reason"] for d in first.values()}
    assert reasons == {"ended", "timed_out"}
    # One more signal for each timed-out episode: late.
    late = [
        (key, json.dumps({**json.loads(value), "id": "late-" + json.loads(value)["id"]}).encode())
        for key, value in dict(timing_out).items()  # the last signal of each
    ]
    asyncio.run(produce(bootstrap, original.topic("signals"), late))
    letters = asyncio.run(consume(bootstrap, original.topic("dlq"), until=len(late), timeout=60))
    assert {d[0]["reason"] for d in letters.values()} == {"late"}
    assert len(letters) == len(late)

    recording = tmp_path / "signals.jsonl"
    proc = cli("record", original.topic("signals"), "-o", str(recording), "--broker", bootstrap)
    assert proc.returncode == 0, proc.stderr
    recorded = read_recording(recording)

    second.start_worker("w2")
    # The second worker consumes before the replay starts, so it reads it as it comes.
    value = json.loads(ended[0][1])
    warmup = (b"warmup", json.dumps({**value, "episode_id": "warmup"}).encode())
    asyncio.run(produce(bootstrap, second.topic("signals"), [warmup]))
    assert asyncio.run(consume(bootstrap, second.topic("episodes"), until=1, timeout=90))
    proc = cli(
        "replay",
        str(recording),
        "--into",
        "topic",
        "--topic",
        second.topic("signals"),
        "--episode-prefix",
        "replay-",
        "--broker",
        bootstrap,
        *pace,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"replayed {len(recorded)} messages" in proc.stderr
    again = by_episode(
        asyncio.run(consume(bootstrap, second.topic("episodes"), until=episodes_n + 1, timeout=120))
    )
    del again["warmup"]
    assert set(again) == {f"replay-{k}" for k in first}, second.logs()
    for key, deliveries in first.items():
        for replayed in again[f"replay-{key}"]:
            got = renamed_back(replayed, prefix="replay-")
            assert got == deliveries[0], (key, got["close_reason"], got["signals"])
    replayed_letters = asyncio.run(
        consume(bootstrap, second.topic("dlq"), until=len(late) + 1, timeout=10)
    )
    assert sorted(
        base64.b64decode(d[0]["key_b64"]).decode() for d in replayed_letters.values()
    ) == sorted(f"replay-{key.decode()}" for key, _ in late)
    assert {d[0]["reason"] for d in replayed_letters.values()} == {"late"}
