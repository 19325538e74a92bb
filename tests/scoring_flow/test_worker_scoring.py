"""Scoring in the Kafka worker, through the real broker: scores join the episode records,
an injected regression fires exactly one alert on the alerts topic and resolves, and the
rolling baselines survive a restart through their compacted topic."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from evalstream.stream.dev_kafka import KafkaBroker
from tests.kafka.helpers import Deployment, consume, consume_raw, produce
from tests.scoring.http_peer import ScriptedServer
from tests.scoring_flow.traffic import PHASES, episodes, write

pytestmark = pytest.mark.kafka
TOTAL = sum(count for _, count, _ in PHASES)
CHUNK = 15


def _records() -> list[tuple[bytes | None, bytes]]:
    return [
        (episode.encode(), json.dumps(sig).encode()) for episode, sigs in episodes() for sig in sigs
    ]


def _number(key: bytes | None) -> int:
    """The episode number in a key such as `sup-0042-normal`."""
    assert key is not None
    return int(key.decode().split("-")[1])


def test_worker_scores_episodes_and_one_regression_is_one_alert(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    _, suite, scoring = write(tmp_path)
    hook = ScriptedServer().__enter__()
    with scoring.open("a") as f:
        f.write(f"sinks: [{{kind: slack, name: team, url: '{hook.url('/slack')}'}}]\n")
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(suite)])
    dep.extra_env["EVALSTREAM_SCORING"] = str(scoring)
    dep.create_topics()
    try:
        dep.start_worker("w1")
        # Live traffic arrives over time: chunks of episodes, each produced once the previous
        # one was reported (all at once, they would close partition by partition, shuffled).
        records = _records()
        per_episode = len(records) // TOTAL
        done = 0
        while done < TOTAL:
            chunk = records[done * per_episode : (done + CHUNK) * per_episode]
            asyncio.run(produce(dep.bootstrap, dep.topic("signals"), chunk))
            done = min(TOTAL, done + CHUNK)
            got = asyncio.run(consume(dep.bootstrap, dep.topic("episodes"), until=done, timeout=60))
            assert len(got) == done, dep.logs()
        for deliveries in got.values():
            record = deliveries[0]
            assert record["scores"]["safety"] == 1.0
            assert record["scores"]["baseline"] is None  # baselines: none in this file
            assert record["passed_with_alerts"] is True
        raw = asyncio.run(consume_raw(dep.bootstrap, dep.topic("alerts"), until=10**6, timeout=8))
        alerts = [json.loads(v) for v in raw]
        regression = [a for a in alerts if a["kind"] == "regression"]
        # Exactly one alert: one key; fired, then (maybe) updated, then resolved.
        assert {a["alert_key"] for a in regression} == {"support/v1/latency_p95_ms"}, regression
        # One key, one partition: topic order is emission order; re-deliveries dropped.
        distinct = {a["dedupe_key"]: a for a in regression}
        states = [a["state"] for a in distinct.values()]
        assert states, regression
        assert states[0] == "firing"
        assert states[-1] == "resolved", states
        assert set(states[1:-1]) <= {"updated"}, states
        # The Slack-compatible sink got the lifecycle too (delivered in the background).
        deadline = time.monotonic() + 20
        while len(hook.requests) < len(distinct) and time.monotonic() < deadline:
            time.sleep(0.2)
        texts = [json.loads(r.body)["text"] for r in hook.requests]
        assert len(texts) >= len(distinct), texts
        assert any("latency_p95_ms" in t for t in texts), texts
    finally:
        dep.stop_all()
        hook.__exit__(None, None, None)


def test_rolling_baselines_survive_a_restart(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    """A restarted worker restores the rolling baselines from the compacted topic: the first
    episode after the restart is scored against the baseline built before it."""
    _, suite, _ = write(tmp_path)
    scoring = tmp_path / "rolling.yaml"
    scoring.write_text("baselines: {mode: rolling, window: 10, key_attrs: [agent_id]}\n")
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(suite)])
    dep.extra_env["EVALSTREAM_SCORING"] = str(scoring)
    dep.create_topics()
    records = _records()
    first_batch = [r for r in records if _number(r[0]) < 20]
    later = [r for r in records if _number(r[0]) == 20]
    try:
        dep.start_worker("w1")
        asyncio.run(produce(dep.bootstrap, dep.topic("signals"), first_batch))
        got = asyncio.run(consume(dep.bootstrap, dep.topic("episodes"), until=20, timeout=90))
        assert len(got) == 20, dep.logs()
        snapshots = asyncio.run(
            consume_raw(dep.bootstrap, dep.topic("baselines"), until=20, timeout=30)
        )
        assert snapshots, "no baseline snapshot was published"
        dep.stop_all()
        dep.start_worker("w2")  # fresh local state: only the topics carry the baselines
        asyncio.run(produce(dep.bootstrap, dep.topic("signals"), later))
        got = asyncio.run(consume(dep.bootstrap, dep.topic("episodes"), until=21, timeout=90))
        after = [d[0] for key, d in got.items() if key.startswith("sup-0020")]
        assert after, dep.logs()
        assert after[0]["scores"]["baseline"] == "rolling(last 10) [agent_id=support]"
        assert after[0]["scores"]["latency"] is not None
    finally:
        dep.stop_all()
