"""An instrumented agent's trace, made with the OpenTelemetry SDK: an HTTP server span, the
agent below it, its LLM call and its tool call. Shared by the end-to-end export tests."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

SUITE_YAML = """\
name: support-agent
match:
  agent_id: "support-*"
defaultAssertions:
  - type: tool.called
    name: search
  - type: tool.notCalled
    name: delete_account
"""


@dataclass(frozen=True)
class AgentTrace:
    trace_id: str
    root: str  # span ids, hex
    agent: str
    chat: str
    tool: str


def write_suite(directory: Path) -> Path:
    path = directory / "suite.yaml"
    path.write_text(SUITE_YAML, encoding="utf-8")
    return path


AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-bot"}
CHAT: dict[str, str | int] = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "anthropic",
    "gen_ai.request.model": "claude-haiku-4-5",
    "gen_ai.usage.input_tokens": 10,
    "gen_ai.usage.output_tokens": 5,
}
TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}


def serve_request(provider: TracerProvider) -> AgentTrace:
    tracer = provider.get_tracer("support-api")
    with (
        tracer.start_as_current_span("POST /chat", kind=SpanKind.SERVER) as root,
        tracer.start_as_current_span("invoke_agent support-bot", attributes=AGENT) as agent,
    ):
        with tracer.start_as_current_span("chat claude-haiku-4-5", attributes=CHAT) as chat:
            pass
        with tracer.start_as_current_span("execute_tool search", attributes=TOOL) as tool:
            pass

    def hex_id(span: object) -> str:
        return format(span.get_span_context().span_id, "016x")  # type: ignore[attr-defined]

    return AgentTrace(
        format(root.get_span_context().trace_id, "032x"),
        hex_id(root),
        hex_id(agent),
        hex_id(chat),
        hex_id(tool),
    )


def wait_ready(url: str, alive: object, log: Path, timeout: float = 60.0) -> None:
    """Until `url` answers 200; `alive()` False (the process ended) fails at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert alive(), log.read_text()  # type: ignore[operator]
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
