"""A real HTTP server on 127.0.0.1 that answers from a script and records what it received.

    with ScriptedServer([503, 503, 200]) as server:   # fails twice, then accepts
        ... POST to server.url("/hook") ...
        server.requests  # [(method, path, headers, body), ...]

After the script runs out, every request gets `default_status`. `delay_s` makes every answer
slow (for a sink that must not block the stream).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b"ok"
    headers: tuple[tuple[str, str], ...] = ()


class ScriptedServer:
    def __init__(
        self,
        script: Iterable[int | Answer] = (),
        *,
        default_status: int = 200,
        delay_s: float = 0.0,
    ) -> None:
        self._script = [a if isinstance(a, Answer) else Answer(a) for a in script]
        self.default = Answer(default_status)
        self.delay_s = delay_s
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self.received_event = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                answer = server.record(
                    Received(
                        "POST",
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                    )
                )
                if server.delay_s:
                    threading.Event().wait(server.delay_s)
                try:
                    self.send_response(answer.status)
                    for key, value in answer.headers:
                        self.send_header(key, value)
                    self.send_header("content-length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout under test): nothing to answer

            def log_message(self, format: str, *args: object) -> None:
                del format, args  # keep test output quiet

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def record(self, received: Received) -> Answer:
        with self._lock:
            self.requests.append(received)
            answer = self._script.pop(0) if self._script else self.default
        self.received_event.set()
        return answer

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
