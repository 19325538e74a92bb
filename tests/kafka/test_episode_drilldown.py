"""`evalstream episode ID --broker ...`: a worker evaluated the example episodes; the
drill-down finds a failing one by reading only its key's partition within the window."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalstream.stream.dev_kafka import KafkaBroker
from tests.kafka.helpers import EXE, Deployment, consume, consume_raw, jsonl_records, produce

pytestmark = pytest.mark.kafka
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-review"
FAILING = "cr-division-by-zero-fail-provider-error"


# A baseline far faster than the failing episode: its record gets a latency delta and a
# CRITICAL latency alert, which the drill-down shows.
BASELINES = {
    "version": 1,
    "source": "run:fast",
    "key_attrs": ["agent_id", "case_id"],
    "baselines": [
        {
            "key": {"agent_id": "code-review-agent", "case_id": "division-by-zero"},
            "latency_ms": 1000.0,
            "tool_names": [],
            "outcome": "success",
            "step_count": 20,
            "episodes": 5,
        }
    ],
}


@pytest.fixture
def deployment(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[Deployment]:
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(EXAMPLE / "suite.yaml")], partitions=3)
    (tmp_path / "baselines.json").write_text(json.dumps(BASELINES))
    scoring = tmp_path / "scoring.yaml"
    scoring.write_text(f"baselines: {{mode: file, file: {tmp_path / 'baselines.json'}}}\n")
    dep.extra_env["EVALSTREAM_SCORING"] = str(scoring)
    dep.create_topics()
    yield dep
    dep.stop_all()


def drilldown(dep: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALSTREAM_")}
    return subprocess.run(
        [str(EXE), "episode", *args, "--broker", dep.bootstrap, "--topic-prefix", dep.prefix],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_drilldown_renders_a_failing_episode_from_the_deployments_topics(
    deployment: Deployment,
) -> None:
    records = jsonl_records(EXAMPLE / "episodes.jsonl")
    episodes = {key for key, _ in records}
    deployment.start_worker("w1")
    asyncio.run(produce(deployment.bootstrap, deployment.topic("signals"), records))
    closed = asyncio.run(
        consume(
            deployment.bootstrap, deployment.topic("episodes"), until=len(episodes), timeout=120
        )
    )
    assert len(closed) == len(episodes), deployment.logs()

    proc = drilldown(deployment, FAILING)
    assert proc.returncode == 0, proc.stderr
    signals = [json.loads(v) for k, v in records if k == FAILING.encode()]
    error = next(s for s in signals if s["name"] == "provider:error")
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"episode {FAILING}: 1 instance(s) in {deployment.bootstrap} (")
    assert f"== instance 1/1: {FAILING}@{signals[0]['id']}" in lines
    at = next(
        i for i, line in enumerate(lines) if f"provider:error [reviewer]  {error['id']}" in line
    )
    # the worker decided it at that signal and published it at once: an early verdict
    assert lines[at + 1].split()[:6] == [
        "FAIL",
        "Code",
        "Review",
        "Agent",
        "Eval#4",
        "agent.completed",
    ]
    assert "(early)" in lines[at + 1]
    shown = [line.split()[1] for line in lines if line.strip().startswith("+")]
    assert shown == [s["name"] for s in signals]  # the signals partition, in order
    assert "status failed" in proc.stdout

    # the scores and alerts of the published record, rendered with the deltas
    [published] = next(d for d in closed.values() if d[0]["episode_id"] == FAILING)[:1]
    scores = published["scores"]
    assert scores["latency_delta_pct"] > 60, scores
    assert f"scores vs baseline {scores['baseline']}: overall " in proc.stdout
    assert f"latency Δ {scores['latency_delta_pct']:+.1f}%" in proc.stdout
    assert proc.stdout.count("ALERT CRITICAL latency: ") == 1, proc.stdout

    as_json = json.loads(drilldown(deployment, FAILING, "--format", "json").stdout)
    [instance] = as_json["instances"]
    assert instance["status"] == "failed"
    assert [v["early"] for v in instance["verdicts"] if v["verdict"] == "fail"] == [True]
    assert instance["scores"] == scores
    assert [a["dimension"] for a in instance["alerts"]] == [
        a["dimension"] for a in published["alerts"]
    ]

    # The same records dumped to a file (as kcat would) give the same drill-down.
    dump = deployment.workdir / "records.jsonl"
    with dump.open("wb") as out:
        for name in ("episodes", "verdicts", "alerts", "signals"):
            topic = deployment.topic(name)
            for value in asyncio.run(
                consume_raw(deployment.bootstrap, topic, until=10**6, timeout=5)
            ):
                out.write(value + b"\n")
    from_file = subprocess.run(
        [str(EXE), "episode", FAILING, str(dump), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout)["instances"] == as_json["instances"]

    unknown = drilldown(deployment, "cr-no-such-episode")
    assert unknown.returncode == 2
    assert "episode 'cr-no-such-episode' not found at" in unknown.stderr
    assert f"{deployment.topic('episodes')} partition " in unknown.stderr
    assert "--since" in unknown.stderr

    empty = drilldown(
        deployment, FAILING, "--since", "2001-01-01T00:00:00Z", "--until", "2001-01-02T00:00:00Z"
    )
    assert empty.returncode == 2
    assert empty.stderr.startswith(
        "error: nothing in the window 2001-01-01T00:00:00.000Z .. 2001-01-02T00:00:00.000Z:"
    ), empty.stderr


@pytest.fixture
def forgetful(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[Deployment]:
    """A deployment whose worker forgets closed episodes at once (markers pruned), so an id
    that comes again after a restart opens a second instance."""
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


def test_every_instance_of_a_reopened_id_is_shown_newest_last(forgetful: Deployment) -> None:
    dep = forgetful
    first = [r for r in jsonl_records(EXAMPLE / "episodes.jsonl") if r[0] == FAILING.encode()]
    again = [
        (key, json.dumps({**json.loads(value), "id": json.loads(value)["id"] + "-again"}).encode())
        for key, value in first
    ]
    worker = dep.start_worker("w1")
    asyncio.run(produce(dep.bootstrap, dep.topic("signals"), first))
    assert len(asyncio.run(consume(dep.bootstrap, dep.topic("episodes"), until=1, timeout=90)))
    log = dep.workdir / "w1.log"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not re.search(
        r"pruned \d+ closed-episode", log.read_text()
    ):
        time.sleep(0.5)
    assert re.search(r"pruned \d+ closed-episode", log.read_text()), dep.logs()
    worker.terminate()  # the close is forgotten: marker pruned, memory gone with the process
    worker.wait(timeout=30)
    dep.start_worker("w2")
    asyncio.run(produce(dep.bootstrap, dep.topic("signals"), again))
    both = asyncio.run(consume(dep.bootstrap, dep.topic("episodes"), until=2, timeout=90))
    assert len(both) == 2, dep.logs()

    proc = drilldown(dep, FAILING, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    instances = json.loads(proc.stdout)["instances"]
    ids = [json.loads(value)["id"] for _, value in first]
    assert [i["key"] for i in instances] == [f"{FAILING}@{ids[0]}", f"{FAILING}@{ids[0]}-again"]
    assert [[s["id"] for s in i["signals"]] for i in instances] == [
        ids,
        [f"{sid}-again" for sid in ids],
    ]
    assert [i["status"] for i in instances] == ["failed", "failed"]
    text = drilldown(dep, FAILING).stdout
    assert text.startswith(f"episode {FAILING}: 2 instance(s) in ")
    assert text.index(f"== instance 1/2: {FAILING}@{ids[0]}\n") < text.index(
        f"== instance 2/2: {FAILING}@{ids[0]}-again\n"
    )
