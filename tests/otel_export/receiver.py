"""A local OTLP/HTTP receiver for tests: a real HTTP server on 127.0.0.1 that decodes the
protobuf requests (logs and traces) with opentelemetry-proto.

Responses can be scripted (`fail_next(503, 503)`), and requests can be held until the test
releases them (`hold()` / `release()`), to fill the exporter's queue.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

JSON = Any


def value_of(value: AnyValue) -> JSON:
    which = value.WhichOneof("value")
    return getattr(value, which) if which else None


@dataclass
class Received:
    """One decoded log record or span."""

    path: str
    name: str  # the log record's event name, or the span's name
    trace_id: str
    span_id: str  # log: the evaluated span; span: the event's own id
    parent_span_id: str | None
    time_ns: int
    end_ns: int | None
    attributes: dict[str, JSON]
    resource: dict[str, JSON]
    status_code: int = 0


@dataclass
class Receiver:
    url: str
    items: list[Received] = field(default_factory=list)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    scripted: list[int] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, *statuses: int) -> None:
        with self.lock:
            self.scripted.extend(statuses)

    def hold(self) -> None:
        self.held.clear()
        self.arrived.clear()
        self._holding = True

    def release(self) -> None:
        self._holding = False
        self.held.set()

    _holding: bool = False

    def wait_for(self, predicate: Callable[[list[Received]], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if predicate(list(self.items)):
                    return
                seen = len(self.items)
            assert time.monotonic() < deadline, f"only {seen} items arrived: {self.items!r}"
            time.sleep(0.05)

    def _handle(self, path: str, headers: dict[str, str], body: bytes) -> int:
        if self._holding:
            self.arrived.set()
            self.held.wait(30)
        with self.lock:
            self.requests.append((path, headers))
            if self.scripted:
                return self.scripted.pop(0)
        if path.endswith("/v1/logs"):
            self._logs(path, ExportLogsServiceRequest.FromString(body))
        elif path.endswith("/v1/traces"):
            self._spans(path, ExportTraceServiceRequest.FromString(body))
        else:
            return 404
        return 200

    def _logs(self, path: str, request: ExportLogsServiceRequest) -> None:
        for rl in request.resource_logs:
            resource = {kv.key: value_of(kv.value) for kv in rl.resource.attributes}
            for sl in rl.scope_logs:
                for r in sl.log_records:
                    item = Received(
                        path,
                        r.event_name,
                        r.trace_id.hex(),
                        r.span_id.hex(),
                        None,
                        r.time_unix_nano,
                        None,
                        {kv.key: value_of(kv.value) for kv in r.attributes},
                        resource,
                    )
                    with self.lock:
                        self.items.append(item)

    def _spans(self, path: str, request: ExportTraceServiceRequest) -> None:
        for rs in request.resource_spans:
            resource = {kv.key: value_of(kv.value) for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    item = Received(
                        path,
                        s.name,
                        s.trace_id.hex(),
                        s.span_id.hex(),
                        s.parent_span_id.hex() or None,
                        s.start_time_unix_nano,
                        s.end_time_unix_nano,
                        {kv.key: value_of(kv.value) for kv in s.attributes},
                        resource,
                        int(s.status.code),
                    )
                    with self.lock:
                        self.items.append(item)


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    receiver: Receiver | None = None

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            assert receiver is not None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status = receiver._handle(self.path, headers, body)
            self.send_response(status)
            if status == 429:
                self.send_header("retry-after", "0")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver = Receiver(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release()
        server.shutdown()
        server.server_close()
