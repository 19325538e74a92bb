"""Episode-store episodes for tests, in the shape of the episode store."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

JSON = Any
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_episode(
    episode_id: str,
    *,
    start: datetime = T0,
    agent: str = "support-bot",
    cost: float = 0.02,
    latency_ms: float = 4000.0,
    tools: Sequence[str] = ("search", "refund"),
    status: str = "success",
    model: str = "gpt-4o",
    output: str = "Your refund is on its way.",
    case_id: str | None = "refund",
    run_id: str | None = None,
    variant: str | None = None,
) -> dict[str, JSON]:
    """An LLM call that costs `cost`, a call and result per tool, a free final LLM call;
    wall-clock `latency_ms` from start to end."""
    at = start
    steps: list[dict[str, JSON]] = [
        {
            "step_index": 0,
            "step_type": "llm_call",
            "model": model,
            "provider": "openai",
            "input_summary": "user asks for a refund",
            "output_summary": "calling tools",
            "tokens": 500,
            "cost_usd": cost,
            "duration_ms": 100,
            "timestamp": iso(at),
        }
    ]
    for tool in tools:
        at += timedelta(milliseconds=100)
        steps.append(
            {
                "step_index": len(steps),
                "step_type": "tool_call",
                "tool_name": tool,
                "input_summary": "{}",
                "duration_ms": 50,
                "timestamp": iso(at),
            }
        )
        steps.append(
            {
                "step_index": len(steps),
                "step_type": "tool_result",
                "tool_name": tool,
                "output_summary": "ok",
                "duration_ms": 0,
                "timestamp": iso(at + timedelta(milliseconds=50)),
            }
        )
    at += timedelta(milliseconds=100)
    steps.append(
        {
            "step_index": len(steps),
            "step_type": "llm_call",
            "model": model,
            "provider": "openai",
            "output_summary": output,
            "tokens": 100,
            "cost_usd": 0.0,
            "duration_ms": 100,
            "timestamp": iso(at),
        }
    )
    metadata: dict[str, JSON] = {}
    for key, value in (("case_id", case_id), ("run_id", run_id), ("variant", variant)):
        if value is not None:
            metadata[key] = value
    return {
        "episode_id": episode_id,
        "agent_id": agent,
        "status": status,
        "steps": steps,
        "started_at": iso(start),
        "ended_at": None
        if status == "running"
        else iso(start + timedelta(milliseconds=latency_ms)),
        "metadata": metadata,
    }
