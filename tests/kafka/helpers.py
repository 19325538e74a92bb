"""Helpers for worker tests against the real broker: run workers, produce, consume."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

EXE = Path(sys.executable).parent / "evalstream"
JSON = Any


@dataclass
class Deployment:
    """One isolated deployment on the shared broker: its own app id and topic prefix."""

    bootstrap: str
    workdir: Path
    suites: list[str]
    partitions: int = 8
    extra_env: dict[str, str] = field(default_factory=dict)
    prefix: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:8]}.")
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    killed: set[str] = field(default_factory=set)
    restarted: set[str] = field(default_factory=set)
    _stopping: bool = False

    @property
    def app_id(self) -> str:
        return self.prefix.rstrip(".")

    def topic(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "EVALSTREAM_BROKER": self.bootstrap,
            "EVALSTREAM_APP_ID": self.app_id,
            "EVALSTREAM_TOPIC_PREFIX": self.prefix,
            "EVALSTREAM_PARTITIONS": str(self.partitions),
            "EVALSTREAM_SUITES": ",".join(self.suites),
            "EVALSTREAM_METRICS_PORT": "0",
            "EVALSTREAM_GRACE_MS": "300",
            "EVALSTREAM_SWEEP_INTERVAL_S": "0.5",
            "EVALSTREAM_RECOVERY_TIMEOUT_S": "30",
            **self.extra_env,
        }

    def create_topics(self) -> None:
        proc = subprocess.run(
            [str(EXE), "topics"],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        env = {**self.env(), "EVALSTREAM_DATA_DIR": str(self.workdir / name)}
        log = (self.workdir / f"{name}.log").open("ab")
        worker = subprocess.Popen(
            [str(EXE), "worker", "--loglevel", "INFO"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.names.append(name)
        self.workers.append(worker)
        return worker

    def supervise(self, interval: float = 0.5) -> None:
        """Restart workers that exit by themselves, as a deployment's supervisor would (the
        worker exits on a stalled recovery); workers the test kills are not restarted."""
        import threading  # noqa: PLC0415

        def loop() -> None:
            while not self._stopping:
                for i, worker in enumerate(list(self.workers)):
                    name = self.names[i]
                    if (
                        worker.poll() is not None
                        and name not in self.killed
                        and name not in self.restarted
                    ):
                        self.restarted.add(name)
                        self.start_worker(f"{name}-restarted")
                time.sleep(interval)

        threading.Thread(target=loop, daemon=True).start()

    def kill(self, name: str) -> None:
        self.killed.add(name)
        worker = self.workers[self.names.index(name)]
        worker.send_signal(signal.SIGKILL)
        worker.wait()

    def stop_all(self) -> None:
        self._stopping = True
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()

    def logs(self) -> str:
        return "\n".join(
            p.read_text(errors="replace")[-3000:] for p in sorted(self.workdir.glob("*.log"))
        )


async def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes]],
    *,
    rate: float | None = None,
) -> int:
    """Publishes (key, value) records with acks=all; `rate` paces them (records/s)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5
    )
    await producer.start()
    sent = 0
    started = time.monotonic()
    try:
        for key, value in records:
            await producer.send(topic, key=key, value=value)
            sent += 1
            if rate is not None and sent % 100 == 0:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await producer.flush()
    finally:
        await producer.stop()
    return sent


async def consume(
    bootstrap: str, topic: str, *, until: int, timeout: float
) -> dict[str, list[dict[str, JSON]]]:
    """Records by dedupe key (every delivery kept), until `until` distinct keys or timeout."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    got: dict[str, list[dict[str, JSON]]] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(got) < until and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for messages in batch.values():
                for message in messages:
                    record = json.loads(message.value)
                    got.setdefault(record["dedupe_key"], []).append(record)
    finally:
        await consumer.stop()
    return got


async def consume_raw(bootstrap: str, topic: str, *, until: int, timeout: float) -> list[bytes]:
    """Raw values of a topic in partition order, until `until` records or timeout."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < until and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for messages in batch.values():
                values.extend(m.value for m in messages if m.value is not None)
    finally:
        await consumer.stop()
    return values


def jsonl_records(path: Path) -> list[tuple[bytes, bytes]]:
    out = []
    for line in path.read_bytes().splitlines():
        if line.strip():
            out.append((json.loads(line)["episode_id"].encode(), line.strip()))
    return out


def by_episode(records: dict[str, list[dict[str, JSON]]]) -> dict[str, list[dict[str, JSON]]]:
    """Episode records (by dedupe key, as `consume` returns them) by episode id: a dedupe key
    names the episode's instance too (`<episode_id>@<first signal id>`)."""
    out: dict[str, list[dict[str, JSON]]] = {}
    for deliveries in records.values():
        for record in deliveries:
            out.setdefault(record["episode_id"], []).append(record)
    return out


def without_key(record: dict[str, JSON]) -> dict[str, JSON]:
    return {k: v for k, v in record.items() if k != "dedupe_key"}


def halves(
    records: list[tuple[bytes, bytes]],
) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """Each episode's first signals, then the rest."""
    by_episode: dict[bytes, list[tuple[bytes, bytes]]] = {}
    for record in records:
        by_episode.setdefault(record[0], []).append(record)
    first = [r for signals in by_episode.values() for r in signals[: len(signals) // 2]]
    rest = [r for signals in by_episode.values() for r in signals[len(signals) // 2 :]]
    return first, rest
