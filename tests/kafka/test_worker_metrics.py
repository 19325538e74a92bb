"""A real Prometheus scrapes a worker fed through the real broker; values after known input."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from pathlib import Path

import pytest

from evalstream.stream.dev_kafka import KafkaBroker
from tests.kafka.helpers import Deployment, consume, jsonl_records, produce
from tests.prometheus.conftest import PrometheusServer
from tests.support.ports import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.prometheus]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-review"


def test_prometheus_scrapes_the_worker(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    port = free_port()
    dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(EXAMPLE / "suite.yaml")])
    dep.extra_env["EVALSTREAM_METRICS_PORT"] = str(port)
    dep.create_topics()
    server: PrometheusServer | None = None
    try:
        dep.start_worker("w1")
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, dep.logs()
                time.sleep(0.3)
        server = PrometheusServer(tmp_path, [f"127.0.0.1:{port}"])
        records = jsonl_records(EXAMPLE / "episodes.jsonl")
        bad: list[tuple[bytes | None, bytes]] = [(b"x", b"{oops"), (None, b"{}")]
        asyncio.run(produce(dep.bootstrap, dep.topic("signals"), [*bad, *records]))
        episodes = asyncio.run(consume(dep.bootstrap, dep.topic("episodes"), until=15, timeout=90))
        assert len(episodes) == 15
        closed = server.wait_for("sum(evalstream_episodes_closed_total)", lambda v: v == 15)
        assert closed == 15
        assert server.value('evalstream_episodes_closed_total{outcome="passed"}') == 11
        assert server.value('evalstream_episodes_closed_total{outcome="failed"}') == 4
        consumed = server.value(
            f'evalstream_signals_consumed_total{{source="{dep.topic("signals")}"}}'
        )
        assert consumed == len(records) + len(bad)
        assert server.value('evalstream_signals_rejected_total{reason="invalid_json"}') == 1
        assert server.value('evalstream_signals_rejected_total{reason="missing_key"}') == 1
        assert server.wait_for("evalstream_open_episodes", lambda v: v == 0) == 0
        lag = server.wait_for("count(evalstream_consumer_lag)", lambda v: (v or 0) > 0, timeout=20)
        assert lag is not None
        assert lag > 0
        # The first lag sample may predate the catch-up; the next reports of the 5 s lag
        # timer must reach zero once every signal was consumed.
        caught_up = server.wait_for("max(evalstream_consumer_lag)", lambda v: v == 0, timeout=30)
        assert caught_up == 0
        assert (server.value("process_resident_memory_bytes") or 0) > 10_000_000
    finally:
        if server is not None:
            server.stop()
        dep.stop_all()
