"""A recording of the topic a worker consumed, replayed with rewritten episode ids into a
second deployment (a second worker), gives the same episode results; so does a replay into
`check` and into the embedded runtime."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalstream.stream.dev_kafka import KafkaBroker
from tests.kafka.helpers import Deployment, consume, jsonl_records, produce
from tests.replay.helpers import REPO, cli, read_recording

pytestmark = pytest.mark.kafka
EXAMPLES = [REPO / "examples" / name for name in ("code-review", "debugging")]
SUITES = [str(e / "suite.yaml") for e in EXAMPLES]
JSON = dict[str, object]


def renamed_back(record: JSON, prefix: str = "", suffix: str = "") -> JSON:
    """The record with the replay's episode-id rewrite undone."""
    out = dict(record)
    for field in ("episode_id", "dedupe_key"):
        value = out.get(field)
        if isinstance(value, str):
            assert value.startswith(prefix), value
            assert value.endswith(suffix), value
            out[field] = value[len(prefix) : len(value) - len(suffix)]
    return out


@pytest.fixture
def deployments(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[list[Deployment]]:
    made: list[Deployment] = []
    for name in ("original", "replay"):
        (tmp_path / name).mkdir()
        dep = Deployment(kafka_broker.bootstrap, tmp_path / name, SUITES, partitions=4)
        dep.create_topics()
        made.append(dep)
    yield made
    for dep in made:
        dep.stop_all()


def test_recorded_topic_replays_to_identical_episode_results(
    deployments: list[Deployment], tmp_path: Path
) -> None:
    original, second = deployments
    bootstrap = original.bootstrap
    original.start_worker("w1")
    second.start_worker("w2")  # starts while the first one works: both are up in time
    records = [r for e in EXAMPLES for r in jsonl_records(e / "episodes.jsonl")]
    episodes_n = len({key for key, _ in records})
    asyncio.run(produce(bootstrap, original.topic("signals"), records))
    first = asyncio.run(
        consume(bootstrap, original.topic("episodes"), until=episodes_n, timeout=120)
    )
    assert len(first) == episodes_n, original.logs()

    # Record what the worker consumed: the signals and its own close-control records.
    recording = tmp_path / "signals.jsonl.zst"
    proc = cli("record", original.topic("signals"), "-o", str(recording), "--broker", bootstrap)
    assert proc.returncode == 0, proc.stderr
    recorded = read_recording(recording)
    assert len(recorded) >= len(records)
    controls = [m for m in recorded if (m.value or b"").startswith(b'{"name":"evalstream:close"')]
    assert controls, "the worker logs its close decisions in the signals topic"

    # Replay into the second deployment under new episode ids: a second worker evaluates it.
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
    )
    assert proc.returncode == 0, proc.stderr
    assert f"replayed {len(recorded)} messages" in proc.stderr
    again = asyncio.run(consume(bootstrap, second.topic("episodes"), until=episodes_n, timeout=120))
    assert len(again) == episodes_n, second.logs()
    assert set(again) == {f"replay-{k}" for k in first}
    for key, deliveries in first.items():
        for replayed in again[f"replay-{key}"]:
            assert renamed_back(replayed, prefix="replay-") == deliveries[0], key
    verdicts_n = sum(len(d[0]["assertions"]) for d in first.values())
    v1 = asyncio.run(consume(bootstrap, original.topic("verdicts"), until=verdicts_n, timeout=30))
    v2 = asyncio.run(consume(bootstrap, second.topic("verdicts"), until=verdicts_n, timeout=60))
    assert len(v1) == len(v2) == verdicts_n
    for key, deliveries in v2.items():
        record = renamed_back(deliveries[0], prefix="replay-")
        assert record == v1[str(record["dedupe_key"])][0], key
    # The same recording, straight into `check` (event time, control records dropped).
    proc = cli(
        "replay",
        str(recording),
        "--episode-suffix",
        "@check",
        "--format",
        "json",
        *[arg for s in SUITES for arg in ("--suite", s)],
    )
    assert proc.returncode == 1, proc.stderr  # some example episodes fail by design
    report = json.loads(proc.stdout)
    assert report["rejected"] == []
    checked = {e["episode_id"]: e for e in report["episodes"]}
    assert len(checked) == episodes_n
    for key, deliveries in first.items():
        expected = {k: v for k, v in deliveries[0].items() if k != "dedupe_key"}
        episode = deliveries[0]["episode_id"]
        assert renamed_back(checked[f"{episode}@check"], suffix="@check") == expected, key
