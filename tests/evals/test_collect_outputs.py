"""Outputs for eval-harness graders from the three target kinds `eval` uses: a Python callable,
an HTTP endpoint (a real local server) and a command; failures become `error` attempts."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evalstream.assertions.harness.grading import OutputError
from evalstream.connectors.targets.base import Target
from evalstream.connectors.targets.collect import Question, collect_outputs
from evalstream.connectors.targets.python_callable import CallableTarget
from evalstream.connectors.targets.spec import parse_target

JSON = Any
AGENT = Path(__file__).resolve().parents[2] / "examples" / "eval-harness" / "agent.py"
QUESTIONS = [
    Question("reverse", {"type": "prompt", "content": "Reverse the string: abc"}, 30.0),
    Question("users", {"method": "GET", "path": "/api/v1/users"}, 30.0),
]


def collect(target: Target, questions: list[Question], attempts: int = 2) -> dict[str, JSON]:
    return asyncio.run(collect_outputs(target, questions, attempts=attempts, concurrency=2))


class _Answers(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["caseId"] == "down":
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"overloaded")
            return
        end = {"name": "harness:end", "payload": {"output": {"echo": body["input"]}}}
        data = json.dumps([end]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def answers_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/answer"
    server.shutdown()
    server.server_close()


def test_a_callable_target_returns_its_output() -> None:
    seen: list[JSON] = []

    def agent(question: JSON) -> JSON:
        seen.append(question)
        return {"answered": question.get("content") or question.get("path")}

    outputs = collect(CallableTarget("agent", agent), QUESTIONS)
    assert outputs["reverse"] == {"attempts": [{"answered": "Reverse the string: abc"}] * 2}
    assert outputs["users"] == {"attempts": [{"answered": "/api/v1/users"}] * 2}
    assert len(seen) == 4


def test_a_callable_that_raises_or_returns_nothing_is_an_error_attempt() -> None:
    def agent(question: JSON) -> JSON:
        if "content" in question:
            raise RuntimeError("model overloaded")
        return None

    outputs = collect(CallableTarget("agent", agent), QUESTIONS, attempts=1)
    [crashed] = outputs["reverse"]["attempts"]
    [silent] = outputs["users"]["attempts"]
    assert crashed == OutputError("target error: RuntimeError: model overloaded")
    assert isinstance(silent, OutputError)
    assert "returned no output" in silent.message


def test_an_http_target_output_from_harness_end(answers_url: str) -> None:
    questions = [*QUESTIONS, Question("down", None, 30.0)]
    outputs = collect(parse_target(answers_url), questions, attempts=1)
    assert outputs["users"] == {"attempts": [{"echo": QUESTIONS[1].input}]}
    [down] = outputs["down"]["attempts"]
    assert isinstance(down, OutputError)
    assert "503" in down.message


def test_a_command_target_keeps_json_outputs() -> None:
    outputs = collect(parse_target(f"cmd:{sys.executable} {AGENT}"), QUESTIONS, attempts=1)
    assert outputs["reverse"] == {"attempts": ["cba"]}
    [users] = outputs["users"]["attempts"]
    assert users["body"]["meta"] == {"page": 1, "per_page": 20, "total": 1}


def test_a_slow_target_times_out_as_an_error_attempt() -> None:
    async def agent(question: JSON) -> JSON:
        await asyncio.sleep(30)
        return "late"

    outputs = collect(CallableTarget("agent", agent), [Question("slow", {}, 0.05)], attempts=1)
    [slow] = outputs["slow"]["attempts"]
    assert slow == OutputError("target timed out after 0.05 s")
