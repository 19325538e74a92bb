#!/usr/bin/env python3
"""A minimal OTLP/HTTP receiver for benchmarks: answers 200 to every POST, counts requests and
bytes, decodes nothing (so it costs the benchmark as little as possible).

    .venv/bin/python bench/otlp_sink.py [--port 4318]

Run it as its own process next to `bench/pipeline_bench.py --otlp-endpoint
http://127.0.0.1:4318`; Ctrl-C prints what it received.
"""

from __future__ import annotations

import argparse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

received = {"requests": 0, "bytes": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per exporter

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        received["requests"] += 1
        received["bytes"] += length
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=4318)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print(f"received {received['requests']} requests, {received['bytes']:,} bytes")


if __name__ == "__main__":
    main()
