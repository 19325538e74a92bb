"""The limits every signal meets, checked once where it enters (docs/signals.md).

A value outside them cannot be processed faithfully: a timestamp that no calendar date
formats, an id too long or too odd to be a Kafka key or a metric label, a token count or a
cost that overflows a sum. `signal_from_obj` (files, stdin, topics, the gateway) and the codecs
that build signals from foreign records call `check_signal`, so every ingest path rejects
the same values with the same reason: the gateway answers 422, a file reports the line, a
topic dead-letters the record.
"""

from __future__ import annotations

import math
import re
from typing import Any

from evalstream.assertions.errors import SignalDecodeError

JSON = Any

MIN_TIMESTAMP_MS = 0.0  # 1970-01-01T00:00:00Z
MAX_TIMESTAMP_MS = 4_102_444_800_000.0  # 2100-01-01T00:00:00Z, exclusive
MAX_ID_CHARS = 256  # ids, names, source fields and the attributes listed in ID_ATTRS
MAX_DURATION_MS = MAX_TIMESTAMP_MS  # no duration is longer than the timestamp range
MAX_TOKENS = 10**15  # sums of many calls stay exact in a double and within 64 bits
MAX_COST_USD = 1e9
MAX_SEQ = 2**63 - 1  # a signed 64-bit integer, as every JSON consumer reads it

# Episode attributes that become Kafka keys, metric labels and baseline keys.
ID_ATTRS = ("tenant", "agent_id", "model", "variant", "run_id", "case_id", "baseline_key")
# The payload numbers that metrics and scoring add up (evalstream/assertions/wire/llm_calls.py,
# facts.py).
TOKEN_KEYS = (
    "inputTokens",
    "input_tokens",
    "prompt_tokens",
    "promptTokens",
    "outputTokens",
    "output_tokens",
    "completion_tokens",
    "completionTokens",
    "totalTokens",
    "total_tokens",
    "cacheReadInputTokens",
    "cache_read_input_tokens",
    "cacheReadTokens",
    "cacheCreationInputTokens",
    "cache_creation_input_tokens",
    "cacheWriteTokens",
)
COST_KEYS = ("costUsd", "cost_usd", "cost")
SUMMED_SIGNALS = frozenset({"provider:end", "harness:end"})  # see check_payload_numbers

# C0 and C1 control characters and UTF-16 surrogates (which no UTF-8 key can carry).
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def check_timestamp(ts: float, raw: JSON, what: str = "signal `timestamp`") -> None:
    # `not (a <= ts < b)` is also true for NaN.
    if not MIN_TIMESTAMP_MS <= ts < MAX_TIMESTAMP_MS:
        raise SignalDecodeError(
            "timestamp_out_of_range",
            f"{what} {_show(raw)} is outside 1970-01-01T00:00:00Z .. 2100-01-01T00:00:00Z; "
            "send epoch milliseconds (not seconds or microseconds) or an RFC 3339 string",
        )


def check_text(value: str, what: str) -> None:
    """An identifier: at most MAX_ID_CHARS characters, no control characters."""
    if len(value) <= MAX_ID_CHARS and (value.isprintable() or _FORBIDDEN.search(value) is None):
        return  # isprintable: the fast answer for ordinary ids; the pattern for the rest
    if len(value) > MAX_ID_CHARS:
        raise SignalDecodeError(
            "id_too_long",
            f"{what} has {len(value)} characters (starts {_show(value[:40])}); "
            f"the limit is {MAX_ID_CHARS}: use a shorter id, e.g. a hash of this one",
        )
    found = _FORBIDDEN.search(value)
    assert found is not None
    raise SignalDecodeError(
        "bad_id_character",
        f"{what} {_show(value[:80])} contains the control character or surrogate "
        f"U+{ord(found.group()):04X} at position {found.start()}; "
        "ids must be printable text: remove it or encode the id (e.g. hex)",
    )


def check_number(value: JSON, limit: float, what: str, unit: str) -> None:
    """A number metrics add up: finite and within ±limit (other types are ignored there)."""
    kind = type(value)
    if kind is not int and kind is not float:
        return
    # Infinities and huge integers are > limit; NaN is not, so it is asked for.
    if abs(value) > limit or (kind is float and math.isnan(value)):
        raise SignalDecodeError(
            "number_out_of_range",
            f"{what} is {_show(value)}; it must be a finite number of at most {limit:g} {unit}",
        )


def check_payload_numbers(name: str, payload: JSON) -> None:
    """Durations, token counts and costs of the signals whose numbers are summed."""
    if type(payload) is not dict:
        return
    if name == "provider:end":
        check_number(payload.get("durationMs"), MAX_DURATION_MS, "`payload.durationMs`", "ms")
        for key in COST_KEYS:
            check_number(payload.get(key), MAX_COST_USD, f"`payload.{key}`", "USD")
        for where, usage in (
            ("payload.usage", payload.get("usage")),
            ("payload.output.usage", _get(payload.get("output"), "usage")),
        ):
            if type(usage) is dict:
                for key in TOKEN_KEYS:
                    check_number(usage.get(key), MAX_TOKENS, f"`{where}.{key}`", "tokens")
    elif name == "harness:end":
        check_number(payload.get("durationMs"), MAX_DURATION_MS, "`payload.durationMs`", "ms")


def check_attrs(attrs: dict[str, JSON]) -> None:
    for key in ID_ATTRS:
        value = attrs.get(key)
        if type(value) is str:
            check_text(value, f"`attrs.{key}`")


def check_seq(seq: int) -> None:
    if not -MAX_SEQ - 1 <= seq <= MAX_SEQ:
        raise SignalDecodeError(
            "number_out_of_range",
            f"signal `seq` {_show(seq)} does not fit a signed 64-bit integer; "
            "number signals 0, 1, 2, … within their episode",
        )


def _get(obj: JSON, key: str) -> JSON:
    return obj.get(key) if type(obj) is dict else None


def _show(value: JSON) -> str:
    """A bounded repr for messages: a 100,000-character value must not become the message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"
