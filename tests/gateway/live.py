"""Running the gateway for tests: a real uvicorn server in a thread, and Kafka read-back."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

import uvicorn
from aiokafka import AIOKafkaConsumer
from fastapi import FastAPI

JSON = Any
TOKENS = {
    "acme": "evs_acme_test_token_0123456789abcdef",
    "globex": "evs_globex_test_token_abcdef0123",
}


def token_env() -> str:
    return ",".join(f"{tenant}:{token}" for tenant, token in TOKENS.items())


def bearer(tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer {TOKENS[tenant]}"}


class LiveServer:
    """Serves an ASGI app on 127.0.0.1 (a free port) from a background thread."""

    def __init__(self, app: FastAPI) -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", access_log=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the gateway did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)

    @property
    def port(self) -> int:
        sockets = self.server.servers[0].sockets
        return int(sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class Message:
    key: str
    value: JSON
    raw: bytes
    partition: int


async def read_topic(
    bootstrap: str, topic: str, *, until: int, timeout: float = 30.0
) -> list[Message]:
    """Messages of a topic from the beginning, until `until` arrived or the timeout."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < until and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=300)
            for tp, messages in batch.items():
                for m in messages:
                    out.append(Message(m.key.decode(), json.loads(m.value), m.value, tp.partition))
    finally:
        await consumer.stop()
    return out


def read_topic_sync(
    bootstrap: str, topic: str, *, until: int, timeout: float = 30.0
) -> list[Message]:
    return asyncio.run(read_topic(bootstrap, topic, until=until, timeout=timeout))


def kcat(bootstrap: str, topic: str) -> list[tuple[str, JSON]]:
    """(key, value) of every message of a topic, read with kcat to the end."""
    proc = subprocess.run(
        ["kcat", "-b", bootstrap, "-t", topic, "-C", "-o", "beginning", "-e", "-q", "-J"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = []
    for line in proc.stdout.splitlines():
        if line.strip():
            envelope = json.loads(line)
            out.append((envelope["key"], json.loads(envelope["payload"])))
    return out


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


async def read_key(
    bootstrap: str, topic: str, key: str, *, count: int, timeout: float = 30.0
) -> list[Message]:
    """The messages of one key (an episode), in log order, once `count` of them arrived."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=300)
            for tp, messages in batch.items():
                for m in messages:
                    if m.key.decode() == key:
                        out.append(Message(key, json.loads(m.value), m.value, tp.partition))
    finally:
        await consumer.stop()
    return out


def read_key_sync(bootstrap: str, topic: str, key: str, *, count: int) -> list[Message]:
    return asyncio.run(read_key(bootstrap, topic, key, count=count))


async def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """`ensure_topics`, retried while a just-created topic's metadata has not propagated
    (its description briefly shows 0 partitions on a loaded machine)."""
    from evalstream.connectors.kafka.topics import TopicMismatchError, ensure_topics  # noqa: PLC0415

    for attempt in range(20):
        try:
            await ensure_topics(bootstrap, names, partitions)
            return
        except TopicMismatchError:
            if attempt == 19:
                raise
            await asyncio.sleep(0.5)
