"""LiteLLM's standard logging payload -> native LLM-call records (see `llm_call_codec`).

A LiteLLM proxy configured with a `generic_api` callback posts `StandardLoggingPayload`
objects (a JSON array by default, NDJSON or single objects on request). Each becomes one
native LLM-call record: `startTime`/`endTime` (epoch seconds) give the timestamp and
duration, `prompt_tokens`/`completion_tokens` the usage, `response_cost` the cost, the
OpenAI-shaped `response` the content, tool calls and stop reason, and `status: failure` with
`error_str` / `error_information` a `provider:error`.

The episode is the caller's explicit one, else an `episode_id` or `session_id` in the
payload's `metadata` (also inside `requester_metadata` or `spend_logs_metadata`, where
LiteLLM passes per-request metadata through), else LiteLLM's `trace_id`.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import orjson

from evalstream.assertions.errors import SignalDecodeError

JSON = Any
EPISODE_KEYS = ("episode_id", "evalstream_episode_id", "session_id", "litellm_session_id")
ATTR_KEYS = ("agent_id", "case_id", "variant", "run_id", "baseline_key")


def _bad(message: str) -> SignalDecodeError:
    return SignalDecodeError("bad_litellm_payload", message)


MAX_TOKENS = 2**53  # token counts beyond this are garbage, not usage


def _number(value: JSON) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _tokens(value: JSON) -> int:
    number = _number(value)
    return int(min(max(number, 0.0), MAX_TOKENS)) if number is not None else 0


def _metadata_dicts(obj: dict[str, JSON]) -> list[dict[str, JSON]]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []
    found = [meta]
    for inner in ("requester_metadata", "spend_logs_metadata"):
        value = meta.get(inner)
        if isinstance(value, dict):
            found.append(value)
    return found


def _episode(obj: dict[str, JSON], explicit: str | None) -> str:
    if explicit:
        return explicit
    for meta in _metadata_dicts(obj):
        for key in EPISODE_KEYS:
            value = meta.get(key)
            if isinstance(value, str) and value:
                return value
    for key in ("trace_id", "id"):
        value = obj.get(key)
        if isinstance(value, str) and value:
            return value
    raise _bad("LiteLLM payload names no episode: no metadata.episode_id, trace_id or id")


def _response_parts(response: JSON) -> tuple[JSON, list[dict[str, JSON]], JSON]:
    """Content, tool calls and finish reason of an OpenAI-shaped response."""
    if isinstance(response, str):
        return response, [], None
    if not isinstance(response, dict):
        return None, [], None
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return response.get("content"), [], response.get("stop_reason")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    assert isinstance(message, dict)
    calls = []
    raw_calls = message.get("tool_calls")
    for call in raw_calls if isinstance(raw_calls, list) else []:
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        assert isinstance(function, dict)
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(orjson.JSONDecodeError):  # not JSON: keep the text
                arguments = orjson.loads(arguments)
        calls.append({"id": call.get("id"), "name": function.get("name"), "input": arguments})
    return message.get("content"), calls, choice.get("finish_reason")


def litellm_call_record(obj: JSON, *, episode_id: str | None = None) -> dict[str, JSON]:
    """One native LLM-call record from one `StandardLoggingPayload`."""
    if not isinstance(obj, dict):
        raise _bad("a LiteLLM logging payload must be a JSON object")
    call_id = obj.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise _bad("LiteLLM payload has no `id` (the call id)")
    start = _number(obj.get("startTime"))
    if start is None:
        raise _bad("LiteLLM payload has no numeric `startTime` (epoch seconds)")
    end = _number(obj.get("endTime"))
    duration_ms = max(0.0, (end - start) * 1000.0) if end is not None else 0.0
    inp = _tokens(obj.get("prompt_tokens"))
    out = _tokens(obj.get("completion_tokens"))
    total = _tokens(obj.get("total_tokens")) if "total_tokens" in obj else inp + out
    content, tool_calls, stop = _response_parts(obj.get("response"))
    record: dict[str, JSON] = {
        "id": f"litellm:{call_id}",
        "episode_id": _episode(obj, episode_id),
        "timestamp": start * 1000.0,
        "durationMs": duration_ms,
        "model": obj.get("model"),
        "provider": obj.get("custom_llm_provider") or None,
        "input": {"messages": obj.get("messages"), "callType": obj.get("call_type")},
        "output": {
            "content": content,
            "toolCalls": tool_calls,
            "usage": {"inputTokens": inp, "outputTokens": out, "totalTokens": total},
        },
    }
    cost = _number(obj.get("response_cost"))
    if cost is not None:
        record["costUsd"] = cost
    if stop is not None:
        record["stopReason"] = stop
    if obj.get("status") == "failure":
        info = (
            obj.get("error_information") if isinstance(obj.get("error_information"), dict) else {}
        )
        assert isinstance(info, dict)
        record["status"] = "error"
        record["error"] = obj.get("error_str") or info.get("error_message") or "LiteLLM failure"
        record["code"] = info.get("error_code")
    attrs = {}
    for meta in _metadata_dicts(obj):
        for key in ATTR_KEYS:
            value = meta.get(key)
            if isinstance(value, str) and value:
                attrs[key] = value
    if attrs:
        record["attrs"] = attrs
    return record
