#!/usr/bin/env python3
"""Benchmark of the gateway against a real Kafka broker.

    .venv/bin/python bench/gateway_bench.py [--batches 400] [--concurrency 8] [--calls 300]

Starts a single-node broker (evalstream.stream.dev_kafka), one `evalstream gateway` process
(uvicorn, one worker) and a lean local Messages API upstream (asyncio, canned answers written in one
piece, so its own latency is small and steady), then measures:

  a. ingest throughput of `POST /v1/signals`: NDJSON batches of 100 signals, `--concurrency`
     requests in flight on keep-alive connections; every answer must be a 202, which the
     gateway sends only after the broker acknowledged (acks=all, idempotent producer);
  b. the recording proxy's added latency: the same Messages API calls sent directly to the
     upstream and through the gateway, one at a time, JSON and streaming (time to the last
     byte); added = percentile(through the proxy) - percentile(direct).

Also prints the CPU time the gateway process used (Linux /proc) during the timed ingest and
per proxied call, and that of the broker and of this load generator during the ingest: the
wall-clock figures depend on whatever else runs on the machine, the CPU figures much less.

Prints a Markdown report. Targets: a >= 20,000 signals/s; b p99 added <= 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from process_cpu import cpu_seconds

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evalstream.connectors.kafka.topics import ensure_topics  # noqa: E402 - after the path setup
from evalstream.stream.dev_kafka import KafkaBroker  # noqa: E402

TOKEN = "evs_bench_token_0123456789abcdefghij"
EXE = Path(sys.executable).parent / "evalstream"


MESSAGE = orjson.dumps(
    {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": "ok " * 20}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 20},
    }
)
EVENTS: list[dict[str, Any]] = [
    {"type": "message_start", "message": {**orjson.loads(MESSAGE), "content": []}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    *(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok "}}
        for _ in range(20)
    ),
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 20}},
    {"type": "message_stop"},
]
STREAM = b"".join(
    b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in EVENTS
)


def _response(content_type: bytes, body: bytes) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: "
        + content_type
        + b"\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


JSON_RESPONSE = _response(b"application/json", MESSAGE)
SSE_RESPONSE = _response(b"text/event-stream", STREAM)


class LeanUpstream:
    """POST /v1/messages -> a canned message (JSON or SSE), keep-alive, on its own thread."""

    def __init__(self) -> None:
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.ready = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port)
        )
        self.ready.set()
        with contextlib.suppress(RuntimeError):
            self.loop.run_until_complete(server.serve_forever())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                streamed = b'"stream":true' in body.replace(b" ", b"")
                writer.write(SSE_RESPONSE if streamed else JSON_RESPONSE)
                await writer.drain()
        writer.close()

    def __enter__(self) -> LeanUpstream:
        self.thread.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def batch(n: int, size: int = 100) -> bytes:
    lines = []
    for i in range(size):
        lines.append(
            orjson.dumps(
                {
                    "id": f"b{n}-{i}",
                    "episode_id": f"ep-{n % 50}",
                    "name": "tool:call" if i % 3 else "text:delta",
                    "timestamp": 1_760_000_000_000 + n * size + i,
                    "seq": i,
                    "source": {"agent": "coder"},
                    "payload": {"id": f"t{i}", "name": "Edit", "input": {"path": f"src/m{i}.py"}},
                }
            )
        )
    return b"\n".join(lines)


async def ingest(
    url: str, batches: int, concurrency: int, pids: dict[str, int]
) -> tuple[float, int, dict[str, float]]:
    """(seconds, signals accepted, CPU seconds of each process in `pids` and of this load
    generator) of the timed part."""
    bodies = [batch(n) for n in range(batches)]
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/x-ndjson"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        for body in bodies[:10]:  # warm-up: connections, producer metadata
            assert (
                await client.post("/v1/signals", content=body, headers=headers)
            ).status_code == 202
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        for body in bodies:
            queue.put_nowait(body)
        accepted = 0

        async def worker() -> None:
            nonlocal accepted
            while not queue.empty():
                body = queue.get_nowait()
                response = await client.post("/v1/signals", content=body, headers=headers)
                if response.status_code != 202:
                    raise RuntimeError(f"{response.status_code}: {response.text}")
                accepted += response.json()["accepted"]

        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        own_before = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        cpu = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        cpu["load generator"] = time.process_time() - own_before
    return elapsed, accepted, cpu


def latencies(
    base: str, calls: int, stream: bool, headers: dict[str, str], pid: int | None = None
) -> tuple[list[float], float]:
    """Seconds per call (after 20 warm-up calls), and the CPU seconds process `pid` used
    meanwhile."""
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 64,
        "stream": stream,
        "messages": [{"role": "user", "content": "Say something short."}],
    }
    out = []
    cpu_before = 0.0
    with httpx.Client(base_url=base, timeout=30) as client:
        for i in range(calls + 20):
            if i == 20 and pid is not None:
                cpu_before = cpu_seconds(pid)
            started = time.perf_counter()
            with client.stream("POST", "/v1/messages", json=body, headers=headers) as response:
                for _ in response.iter_raw():
                    pass
            if response.status_code != 200:
                raise RuntimeError(f"{response.status_code}")
            if i >= 20:  # warm-up
                out.append(time.perf_counter() - started)
    return out, (cpu_seconds(pid) - cpu_before) if pid is not None else float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    prefix = "bench."
    with KafkaBroker() as broker, LeanUpstream() as up:
        asyncio.run(ensure_topics(broker.bootstrap, [prefix + "signals", prefix + "llm-calls"], 8))
        port = free_port()
        env = {
            **os.environ,
            "EVALSTREAM_BROKER": broker.bootstrap,
            "EVALSTREAM_TOPIC_PREFIX": prefix,
            "EVALSTREAM_GATEWAY_TOKENS": f"bench:{TOKEN}",
            "EVALSTREAM_GATEWAY_ANTHROPIC_UPSTREAM": up.base_url,
        }
        gateway = subprocess.Popen(
            [str(EXE), "gateway", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("the gateway did not become ready")
                time.sleep(0.2)
            pids = {"gateway": gateway.pid, "broker": broker.pid or 0}
            elapsed, accepted, cpu = asyncio.run(ingest(url, args.batches, args.concurrency, pids))
            headers = {"x-api-key": "sk-ant-bench", "anthropic-version": "2023-06-01"}
            proxied_headers = {**headers, "x-evalstream-token": TOKEN}
            rows = []
            for stream in (False, True):
                direct, _ = latencies(up.base_url, args.calls, stream, headers)
                proxied, used = latencies(url, args.calls, stream, proxied_headers, gateway.pid)
                rows.append((stream, direct, proxied, used))
        finally:
            gateway.terminate()
            gateway.wait(timeout=30)
    load = os.getloadavg()
    print("## Gateway benchmark\n")
    print(
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at the end\n"
    )
    print("| measure | value |\n|---|---|")
    print(
        f"| a. ingest, NDJSON batches of 100, {args.concurrency} in flight, acks=all "
        f"| **{accepted / elapsed:,.0f} signals/s** ({accepted:,} signals in {elapsed:.2f} s, "
        f"{accepted / 100 / elapsed:,.0f} requests/s) |"
    )
    # The gateway's own CPU time says whether it was CPU-bound (busy ~ 100 % of one core) or
    # waiting for the machine (other processes, the broker): signals per CPU-second is the
    # ceiling of one gateway process on an otherwise idle core.
    print(
        f"| a. gateway CPU during ingest | {cpu['gateway']:.2f} s of {elapsed:.2f} s "
        f"({100 * cpu['gateway'] / elapsed:.0f} % of one core; "
        f"{accepted / cpu['gateway']:,.0f} signals per CPU-second) |"
    )
    print(
        f"| a. CPU of the others meanwhile | broker {cpu['broker']:.2f} s, load generator "
        f"{cpu['load generator']:.2f} s (of {(os.cpu_count() or 1) * elapsed:.2f} CPU-seconds "
        "on all cores, shared with any other process) |"
    )
    print(
        "\n| b. proxy | direct p50 | direct p99 | proxied p50 | proxied p99 "
        "| added p50 | added p99 | gateway CPU per call |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for stream, direct, proxied, used in rows:
        d50, d99, p50, p99 = (
            pct(direct, 0.5),
            pct(direct, 0.99),
            pct(proxied, 0.5),
            pct(proxied, 0.99),
        )
        ms = 1000.0
        print(
            f"| {'streaming' if stream else 'JSON'} ({len(direct)} calls) | {d50 * ms:.2f} ms "
            f"| {d99 * ms:.2f} ms | {p50 * ms:.2f} ms | {p99 * ms:.2f} ms "
            f"| **{(p50 - d50) * ms:.2f} ms** | **{(p99 - d99) * ms:.2f} ms** "
            f"| {used / len(proxied) * ms:.2f} ms |"
        )


if __name__ == "__main__":
    main()
