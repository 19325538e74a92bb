"""Reading LLM-call signals: usage, model and content of `provider:*` payloads.

Accepts the DESIGN §2 shape (`output.usage.inputTokens`), the signal-native appendix shape
(`usage` at the top of the payload) and provider spellings (`input_tokens`, `prompt_tokens`).
"""

from __future__ import annotations

from typing import Any

import orjson

from evalstream.assertions.evaluation.matchers import is_number
from evalstream.assertions.wire.pricing import Usage

JSON = Any

_INPUT_KEYS = ("inputTokens", "input_tokens", "prompt_tokens", "promptTokens")
_OUTPUT_KEYS = ("outputTokens", "output_tokens", "completion_tokens", "completionTokens")
_TOTAL_KEYS = ("totalTokens", "total_tokens")
_CACHE_READ_KEYS = ("cacheReadInputTokens", "cache_read_input_tokens", "cacheReadTokens")
_CACHE_WRITE_KEYS = (
    "cacheCreationInputTokens",
    "cache_creation_input_tokens",
    "cacheWriteTokens",
)


def _first_int(obj: dict[str, JSON], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = obj.get(key)
        if value is not None and is_number(value):  # most spellings are absent: None
            return max(0, int(value))  # negative counts are garbage; sums must only grow
    return None


def usage_of(payload: JSON) -> Usage | None:
    """Usage of one `provider:end` payload, or None when it reports none."""
    if not isinstance(payload, dict):
        return None
    usage = payload.get("usage")
    output = payload.get("output")
    if not isinstance(usage, dict) and isinstance(output, dict):
        usage = output.get("usage")
    if not isinstance(usage, dict):
        return None
    inp = _first_int(usage, _INPUT_KEYS) or 0
    out = _first_int(usage, _OUTPUT_KEYS) or 0
    total = _first_int(usage, _TOTAL_KEYS)
    return Usage(
        input_tokens=inp,
        output_tokens=out,
        total_tokens=total if total is not None else inp + out,
        cache_read_tokens=_first_int(usage, _CACHE_READ_KEYS) or 0,
        cache_write_tokens=_first_int(usage, _CACHE_WRITE_KEYS) or 0,
    )


def reported_cost(payload: JSON) -> float | None:
    if isinstance(payload, dict):
        for key in ("costUsd", "cost_usd", "cost"):
            value = payload.get(key)
            if is_number(value):
                return max(0.0, float(value))
    return None


def model_of(payload: JSON) -> str | None:
    if isinstance(payload, dict):
        model = payload.get("model")
        if isinstance(model, str) and model:
            return model
    return None


def content_text(value: JSON) -> str | None:
    """Text of a content value: a string, or a list of content blocks (text blocks joined)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return str(value["text"])
    return None


def provider_output_text(payload: JSON) -> str | None:
    """The text content of a `provider:end` payload."""
    if not isinstance(payload, dict):
        return None
    output = payload.get("output")
    if isinstance(output, dict):
        return content_text(output.get("content"))
    return content_text(output)


def output_value_text(value: JSON) -> str | None:
    """`harness:end.payload.output` as text: strings as is, other JSON serialised."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def state_key_of(name: str, payload: JSON) -> str | None:
    """The state key a `state:<key>:changed` signal sets (payload `key` wins)."""
    if isinstance(payload, dict):
        key = payload.get("key")
        if isinstance(key, str) and key:
            return key
    inner = name[len("state:") : -len(":changed")]
    return inner or None


def is_state_change(name: str) -> bool:
    return name.startswith("state:") and name.endswith(":changed") and len(name) > 14
