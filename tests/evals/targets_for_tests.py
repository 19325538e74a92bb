"""Small targets for runner tests (imported as `tests.evals.targets_for_tests:NAME`)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from evalstream.connectors.targets.recorder import Recorder

# What the targets observed, for the tests to check (reset by each test).
EVENTS: list[str] = []
ATTEMPTS: dict[str, int] = {}


def echo(case_input: dict[str, Any]) -> str:
    """Sync, no recorder: the output is the return value."""
    return str(case_input.get("say", ""))


async def slow_async(case_input: dict[str, Any], recorder: Recorder) -> str:
    """Sleeps `sleep` seconds; records whether it was cancelled or finished."""
    name = str(case_input.get("name", "?"))
    EVENTS.append(f"start {name}")
    recorder.emit("work:started", {"name": name})
    if case_input.get("marker"):  # tells a test in another process that this case started
        Path(str(case_input["marker"])).write_text(name)
    try:
        await asyncio.sleep(float(case_input.get("sleep", 0)))
    except asyncio.CancelledError:
        EVENTS.append(f"cancelled {name}")
        raise
    EVENTS.append(f"done {name}")
    return f"finished {name}"


def slow_sync(case_input: dict[str, Any], recorder: Recorder) -> str:
    """A blocking target that calls the recorder between steps (so it can be stopped)."""
    name = str(case_input.get("name", "?"))
    try:
        for step in range(int(case_input.get("steps", 1))):
            recorder.emit("step", {"n": step})
            time.sleep(float(case_input.get("step_s", 0.01)))
    except BaseException as exc:
        EVENTS.append(f"stopped {name} by {type(exc).__name__}")
        raise
    EVENTS.append(f"done {name}")
    return f"finished {name}"


def flaky(case_input: dict[str, Any], recorder: Recorder) -> str:
    """Raises on the first `fail_times` attempts of a case, then answers."""
    key = f"{recorder.case_id}:{recorder.attrs.get('sample')}"
    ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
    if ATTEMPTS[key] <= int(case_input.get("fail_times", 0)):
        raise ConnectionError(f"upstream unavailable (attempt {ATTEMPTS[key]})")
    return str(case_input.get("say", "ok"))


def returns_signals(case_input: dict[str, Any]) -> dict[str, Any]:
    """Returns its signals instead of using the recorder."""
    return {
        "signals": [
            {"name": "agent:activated", "payload": {"agent": "solo"}, "timestamp": 1000},
            {"name": "tool:call", "payload": {"name": "Read", "input": {}}, "timestamp": 1001},
        ],
        "output": case_input.get("say"),
    }


def raises(case_input: dict[str, Any]) -> str:
    raise ValueError("the agent crashed")


def claude_agent(case_input: dict[str, Any]) -> str:
    """Calls Claude twice (JSON, then streamed) with a client it builds itself: no recorder,
    no http_client; the runner's instrumentation records the calls."""
    import anthropic  # noqa: PLC0415 - only this target needs the SDK

    client = anthropic.Anthropic(base_url=case_input["base_url"], api_key="test", max_retries=0)
    with client:
        return _ask_twice(client, case_input)


def _ask_twice(client: Any, case_input: dict[str, Any]) -> str:
    first = client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=50,
        messages=[{"role": "user", "content": str(case_input["question"])}],
    )
    answer = "".join(b.text for b in first.content if b.type == "text")
    with client.messages.stream(
        model="claude-opus-4-1",
        max_tokens=50,
        messages=[{"role": "user", "content": f"Polish: {answer}"}],
    ) as stream:
        final = stream.get_final_message()
    return "".join(b.text for b in final.content if b.type == "text")


async def async_claude_agent(case_input: dict[str, Any]) -> str:
    import anthropic  # noqa: PLC0415

    client = anthropic.AsyncAnthropic(
        base_url=case_input["base_url"], api_key="test", max_retries=0
    )
    reply = await client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=50,
        messages=[{"role": "user", "content": str(case_input["question"])}],
    )
    await client.close()
    return "".join(b.text for b in reply.content if b.type == "text")


RELEASE = threading.Event()


def stuck_sync(case_input: dict[str, Any]) -> str:
    """Blocks without ever calling the recorder: it cannot be stopped from outside."""
    RELEASE.wait(30)
    EVENTS.append("stuck released")
    return "late"
