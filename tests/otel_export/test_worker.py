"""The Kafka worker (through the real broker) exports the same evaluation events as `check`
on the same signals: every verdict, under the same span, with the same label."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from evalstream.connectors.otel_export.evaluation_events import episode_events
from evalstream.stream.dev_kafka import KafkaBroker
from evalstream.stream.offline import check_files
from tests.kafka.helpers import Deployment, produce
from tests.otel_export.receiver import otlp_receiver

pytestmark = pytest.mark.kafka
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-review"

Event = tuple[str, str, str, str]  # dedupe key, trace id, evaluated span id, label


def expected_events() -> set[Event]:
    from evalstream.assertions.suite_format.suites import load_suite  # noqa: PLC0415

    records: list[dict[str, object]] = []
    check_files(
        [str(EXAMPLE / "episodes.jsonl")],
        [load_suite(EXAMPLE / "suite.yaml")],
        on_record=records.append,
    )
    return {
        (
            str(e.attributes["evalstream.dedupe_key"]),
            e.trace_id,
            e.parent_span_id,
            str(e.attributes["gen_ai.evaluation.score.label"]),
        )
        for record in records
        for e in episode_events(record, 0)
    }


def test_the_worker_exports_what_check_exports(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    expected = expected_events()
    with otlp_receiver() as receiver:
        dep = Deployment(kafka_broker.bootstrap, tmp_path, [str(EXAMPLE / "suite.yaml")])
        dep.extra_env["EVALSTREAM_OTLP_ENDPOINT"] = receiver.url
        dep.create_topics()
        try:
            dep.start_worker("w1")
            lines = EXAMPLE.joinpath("episodes.jsonl").read_bytes().splitlines()
            records = [(orjson.loads(line)["episode_id"].encode(), line) for line in lines]
            asyncio.run(produce(dep.bootstrap, dep.topic("signals"), records))
            keys = {key for key, *_ in expected}
            receiver.wait_for(
                lambda items: {str(i.attributes["evalstream.dedupe_key"]) for i in items} >= keys,
                timeout=120,
            )
        finally:
            dep.stop_all()
    got = {
        (
            str(i.attributes["evalstream.dedupe_key"]),
            i.trace_id,
            i.span_id,
            str(i.attributes["gen_ai.evaluation.score.label"]),
        )
        for i in receiver.items
    }
    assert got == expected, dep.logs()
    assert {i.path for i in receiver.items} == {"/v1/logs"}
