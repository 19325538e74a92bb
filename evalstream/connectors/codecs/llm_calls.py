"""LLM-call records -> `provider:start` / `provider:end` (or `provider:error`) signals.

Two shapes are accepted on the llm-calls topic:
- native: {id, episode_id, timestamp (call start), durationMs, model, provider, agent?,
  parent?, input?, output: {content, toolCalls, usage}, costUsd?, stopReason?, status?, error?,
  attrs?}
- the AIR record of the AIR gateway: {run_id, trace_id, timestamp, model, provider,
  endpoint, tokens: {prompt, completion, total}, duration_ms, status, error?}; it names no
  episode, so the episode id comes from the record's `episode_id` or the message key
  (`attrs` and `agent`, when a gateway adds them, are kept as in the native shape).
"""

from __future__ import annotations

from typing import Any

from evalstream.assertions.errors import SignalDecodeError
from evalstream.assertions.evaluation.matchers import is_number
from evalstream.assertions.wire.signals import Signal, check_signal, parse_timestamp

JSON = Any


def _need(obj: dict[str, JSON], key: str, what: str) -> JSON:
    value = obj.get(key)
    if value is None:
        raise SignalDecodeError("bad_llm_call", f"LLM-call record has no `{key}` ({what})")
    return value


def llm_call_signals(obj: JSON, *, episode_id: str | None = None) -> list[Signal]:
    if not isinstance(obj, dict):
        raise SignalDecodeError("not_an_object", "an LLM-call record must be a JSON object")
    if "run_id" in obj and "tokens" in obj:
        return _air(obj, episode_id)
    return _native(obj, episode_id)


def _episode(obj: dict[str, JSON], episode_id: str | None) -> str:
    ep = obj.get("episode_id") or episode_id
    if not isinstance(ep, str) or not ep:
        raise SignalDecodeError(
            "missing_episode_id",
            "LLM-call record names no episode: set `episode_id` or key the message by episode id",
        )
    return ep


def _start_ms(obj: dict[str, JSON]) -> float:
    raw = _need(obj, "timestamp", "the call's start time")
    try:
        return parse_timestamp(raw)
    except ValueError as exc:
        raise SignalDecodeError("bad_timestamp", f"LLM-call `timestamp` {raw!r}: {exc}") from exc


def _opt_str(obj: dict[str, JSON], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


def _native(obj: dict[str, JSON], episode_id: str | None) -> list[Signal]:
    ep = _episode(obj, episode_id)
    call_id = str(_need(obj, "id", "a unique call id"))
    start = _start_ms(obj)
    duration = obj.get("durationMs")
    duration_ms = float(duration) if is_number(duration) else 0.0
    agent, parent = _opt_str(obj, "agent"), _opt_str(obj, "parent")
    provider = _opt_str(obj, "provider")
    attrs = obj.get("attrs") if isinstance(obj.get("attrs"), dict) else None
    begin = Signal(
        id=f"{call_id}:start",
        episode_id=ep,
        name="provider:start",
        ts=start,
        agent=agent,
        parent=parent,
        provider=provider,
        payload={"model": obj.get("model"), "provider": provider, "input": obj.get("input")},
        attrs=attrs,
    )
    if obj.get("status") == "error" or obj.get("error"):
        end_payload: dict[str, JSON] = {"error": obj.get("error"), "code": obj.get("code")}
        end_name = "provider:error"
    else:
        end_payload = {
            "output": obj.get("output"),
            "durationMs": duration_ms,
            "model": obj.get("model"),
        }
        for key in ("costUsd", "stopReason"):
            if key in obj:
                end_payload[key] = obj[key]
        end_name = "provider:end"
    end = Signal(
        id=f"{call_id}:end",
        episode_id=ep,
        name=end_name,
        ts=start + duration_ms,
        agent=agent,
        parent=begin.id,
        provider=provider,
        payload=end_payload,
    )
    return [check_signal(begin), check_signal(end)]


def _air(obj: dict[str, JSON], episode_id: str | None) -> list[Signal]:
    ep = _episode(obj, episode_id)
    run_id = str(obj["run_id"])
    tokens = obj.get("tokens") if isinstance(obj.get("tokens"), dict) else {}
    assert isinstance(tokens, dict)
    duration = obj.get("duration_ms")
    native = {
        "id": run_id,
        "episode_id": ep,
        "timestamp": obj.get("timestamp"),
        "durationMs": duration if is_number(duration) else 0,
        "model": obj.get("model"),
        "provider": obj.get("provider"),
        "status": obj.get("status"),
        "error": obj.get("error"),
        "output": {
            "usage": {
                "inputTokens": tokens.get("prompt", 0),
                "outputTokens": tokens.get("completion", 0),
                "totalTokens": tokens.get("total"),
            }
        },
        "input": {"endpoint": obj.get("endpoint"), "trace_id": obj.get("trace_id")},
        "attrs": obj.get("attrs"),  # e.g. the tenant a gateway stamped on the record
        "agent": obj.get("agent"),
    }
    return _native(native, episode_id)
