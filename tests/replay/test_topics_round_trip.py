"""record -> replay through the real broker: byte-identical messages, slices, zstd, Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from evalstream.connectors.files.recording import RecordedMessage, RecordingError, RecordingReader
from evalstream.stream.dev_kafka import KafkaBroker
from tests.replay.helpers import EXE, cli, create_topic, read_recording, read_topic

pytestmark = pytest.mark.kafka
# A day ago, on whole seconds: brokers reject timestamps more than an hour ahead (Kafka 4).
T0 = (int(time.time()) - 86_400) * 1000

# Messages a topic may hold, whatever their producer: compact JSON, other JSON spellings,
# bytes that are not UTF-8 (in keys, values and headers), null header values, tombstones,
# keyless messages (they keep their partition) and empty values.
ODD: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (b"ep-1", b'{"id":"a","episode_id":"ep-1","name":"x","timestamp":1}', []),
    (b"ep-1", b'{"id": "b", "name": "spaced json",  "timestamp": 2}', [("trace", b"t-1")]),
    (b"ep-2", b"\xff\xfe not utf-8 \x00", [("bin", b"\x80\x81"), ("nil", None)]),
    (b"\xc3\x28", b'{"bad key":true}', []),
    (b"ep-3", None, []),
    (None, b'{"keyless":1}', []),
    (b"ep-4", b"", []),
    (b"ep-5", b'"just a string"', []),
    (b"ep-6", b"1.50", []),
]


async def produce_odd(bootstrap: str, topic: str) -> list[RecordedMessage]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i, (key, value, headers) in enumerate(ODD * 3):
            await producer.send_and_wait(
                topic,
                value=value,
                key=key,
                partition=i % 3 if key is None else None,
                timestamp_ms=T0 + i * 1000,
                headers=headers or None,
            )
    finally:
        await producer.stop()
    return await read_topic(bootstrap, topic, count=len(ODD) * 3)


def identity(m: RecordedMessage) -> tuple[object, ...]:
    return (m.partition, m.key, m.value, m.headers, m.timestamp_ms)


@pytest.mark.parametrize("name", ["odd.jsonl", "odd.jsonl.zst"])
def test_record_then_replay_is_byte_identical(
    kafka_broker: KafkaBroker, tmp_path: Path, name: str
) -> None:
    bootstrap = kafka_broker.bootstrap
    source, target = f"odd-{uuid.uuid4().hex[:8]}", f"copy-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(bootstrap, source, 3))
    asyncio.run(create_topic(bootstrap, target, 3))
    produced = asyncio.run(produce_odd(bootstrap, source))
    assert len(produced) == len(ODD) * 3

    path = tmp_path / name
    rec = cli("record", source, "-o", str(path), "--broker", bootstrap)
    assert rec.returncode == 0, rec.stderr
    assert f"recorded {len(produced)} of {len(produced)} planned messages" in rec.stderr
    assert path.read_bytes().startswith(b"\x28\xb5\x2f\xfd") is name.endswith(".zst")
    recorded = read_recording(path)
    assert sorted(recorded, key=lambda m: (m.partition, m.offset)) == produced

    rep = cli("replay", str(path), "--into", "topic", "--topic", target, "--broker", bootstrap)
    assert rep.returncode == 0, rep.stderr
    copied = asyncio.run(read_topic(bootstrap, target, count=len(produced)))
    assert [identity(m) for m in copied] == [identity(m) for m in produced]


async def produce_timed(bootstrap: str, topic: str, per_partition: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(per_partition):
            for p in (0, 1):
                await producer.send_and_wait(
                    topic,
                    value=b'{"n":%d,"p":%d}' % (i, p),
                    key=b"k%d" % p,
                    partition=p,
                    timestamp_ms=T0 + i * 1000,
                )
    finally:
        await producer.stop()


def test_slices_by_time_offset_and_partition(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = f"timed-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(bootstrap, topic, 2))
    asyncio.run(produce_timed(bootstrap, topic, 10))

    def record(*args: str) -> list[tuple[int, int]]:
        path = tmp_path / f"{uuid.uuid4().hex}.jsonl"
        proc = cli("record", topic, "-o", str(path), "--broker", bootstrap, *args)
        assert proc.returncode == 0, proc.stderr
        return sorted((m.partition, m.offset) for m in read_recording(path))

    start = datetime.fromtimestamp((T0 + 3000) / 1000, tz=UTC).isoformat().replace("+00:00", "Z")
    by_time = record("--from-time", start, "--to-time", str(T0 + 7000))
    assert by_time == [(p, o) for p in (0, 1) for o in (3, 4, 5, 6)]
    assert record("--offset", "1:8", "--partition", "1") == [(1, 8), (1, 9)]
    assert record("--offset", "7", "--offset", "0:9") == [(0, 9), (1, 7), (1, 8), (1, 9)]
    assert record("--from-time", str(T0 + 60_000)) == []
    assert len(record()) == 20

    # A topic slice replays straight into another topic, without a file in between.
    target = f"sliced-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(bootstrap, target, 2))
    proc = cli(
        "replay",
        "--from-topic",
        topic,
        "--from-time",
        str(T0 + 8000),
        "--into",
        "topic",
        "--topic",
        target,
        "--broker",
        bootstrap,
        "--keep-partitions",
    )
    assert proc.returncode == 0, proc.stderr
    copied = asyncio.run(read_topic(bootstrap, target, count=4))
    assert [(m.partition, m.value) for m in copied] == [
        (p, b'{"n":%d,"p":%d}' % (i, p)) for p in (0, 1) for i in (8, 9)
    ]


def test_bad_selections_are_user_errors(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap
    out = str(tmp_path / "x.jsonl")
    missing = cli("record", "no-such-topic-here", "-o", out, "--broker", bootstrap)
    assert missing.returncode == 2
    assert "topic 'no-such-topic-here' does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
    topic = f"small-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(bootstrap, topic, 2))
    wrong = cli("record", topic, "-o", out, "--broker", bootstrap, "--partition", "5")
    assert wrong.returncode == 2
    assert "has no partition 5; its partitions are 0..1" in wrong.stderr
    when = cli("record", topic, "-o", out, "--broker", bootstrap, "--from-time", "yesterday")
    assert when.returncode == 2
    assert "time 'yesterday' is not understood" in when.stderr
    both = cli("record", topic, "-o", out, "--follow", "--to-time", "now")
    assert both.returncode == 2


def test_ctrl_c_leaves_a_complete_compressed_recording(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = f"live-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topic(bootstrap, topic, 2))
    path = tmp_path / "live.jsonl.zst"
    recorder = subprocess.Popen(
        [str(EXE), "record", topic, "-o", str(path), "--follow", "--broker", bootstrap],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        asyncio.run(produce_timed(bootstrap, topic, 5))  # produced while it follows
        seen: list[RecordedMessage] = []
        deadline = time.monotonic() + 60
        while len(seen) < 10:
            assert recorder.poll() is None, recorder.stderr.read() if recorder.stderr else ""
            assert time.monotonic() < deadline, f"only {len(seen)} messages were flushed"
            time.sleep(0.3)
            # While recording, the file is an unfinished zstd frame: the flushed blocks read,
            # then the reader says the frame is unfinished.
            seen = read_flushed(path)
        recorder.send_signal(signal.SIGINT)
        _, err = recorder.communicate(timeout=30)
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()
    assert recorder.returncode == 0, err  # --follow: Ctrl-C is how it ends
    assert "recorded 10 messages" in err
    assert "Traceback" not in err
    complete = read_recording(path)  # no error: the frame was finished
    assert sorted((m.partition, m.offset) for m in complete) == [
        (p, o) for p in (0, 1) for o in range(5)
    ]


def read_flushed(path: Path) -> list[RecordedMessage]:
    """The messages flushed so far into a recording that is still being written."""
    got: list[RecordedMessage] = []
    if not path.exists():
        return got
    problem = ""
    with RecordingReader(path) as reader:
        messages = iter(reader)
        while not problem:
            try:
                got.append(next(messages))
            except StopIteration:
                break
            except RecordingError as exc:
                problem = str(exc)
    assert not problem or "ends inside a zstd frame" in problem, problem
    return got
