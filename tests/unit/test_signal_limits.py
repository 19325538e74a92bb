"""The limits every signal meets at the edge (evalstream/assertions/wire/limits.py,
docs/signals.md)."""

from __future__ import annotations

from typing import Any

import pytest

from evalstream.assertions.errors import SignalDecodeError
from evalstream.assertions.wire.limits import MAX_ID_CHARS, MAX_TIMESTAMP_MS
from evalstream.assertions.wire.signals import Signal, check_signal, signal_from_obj
from evalstream.connectors.codecs.llm_calls import llm_call_signals

OK: dict[str, Any] = {"id": "s1", "episode_id": "e1", "name": "tool:call", "timestamp": 1000}


def with_(**changes: Any) -> dict[str, Any]:
    return {**OK, **changes}


def reason_of(obj: dict[str, Any]) -> SignalDecodeError:
    with pytest.raises(SignalDecodeError) as info:
        signal_from_obj(obj)
    return info.value


@pytest.mark.parametrize(
    "timestamp",
    [1e308, -1e308, 1e20, -1, MAX_TIMESTAMP_MS, float("nan"), float("inf"), "2100-01-01T00:00:00Z"],
)
def test_timestamps_outside_the_range_are_rejected_with_the_fix(timestamp: Any) -> None:
    error = reason_of(with_(timestamp=timestamp))
    assert error.reason == "timestamp_out_of_range"
    assert "epoch milliseconds" in error.message
    assert "2100-01-01" in error.message


@pytest.mark.parametrize("timestamp", [0, 1000, MAX_TIMESTAMP_MS - 1, "2099-12-31T23:59:59Z"])
def test_timestamps_inside_the_range_are_accepted(timestamp: Any) -> None:
    assert signal_from_obj(with_(timestamp=timestamp)).episode_id == "e1"


@pytest.mark.parametrize(
    "field", ["id", "episode_id", "name", "source.agent", "source.parent", "attrs.agent_id"]
)
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("x" * 100_000, "id_too_long"),
        ("x" * (MAX_ID_CHARS + 1), "id_too_long"),
        ("a\x00b", "bad_id_character"),
        ("line\nbreak", "bad_id_character"),
        ("del\x7f", "bad_id_character"),
        ("lone\ud800surrogate", "bad_id_character"),
    ],
)
def test_odd_ids_are_rejected_in_every_id_field(field: str, value: str, reason: str) -> None:
    obj = with_()
    if "." in field:
        outer, inner = field.split(".")
        obj[outer] = {inner: value}
    else:
        obj[field] = value
    error = reason_of(obj)
    assert error.reason == reason
    assert f"`{field}`" in error.message
    assert len(error.message) < 400  # a 100,000-character id does not become the message


def test_an_episode_id_from_the_message_key_is_checked_too() -> None:
    obj = {k: v for k, v in OK.items() if k != "episode_id"}
    with pytest.raises(SignalDecodeError, match="episode_id"):
        signal_from_obj(obj, episode_id="k" * 1000)


@pytest.mark.parametrize(
    "value", ["x" * MAX_ID_CHARS, "épisode 7 — ünïcode", "emoji 🚀", "nbsp\u00a0ok", "tab-free"]
)
def test_ordinary_and_unicode_ids_are_accepted(value: str) -> None:
    assert signal_from_obj(with_(episode_id=value, id=value)).episode_id == value


@pytest.mark.parametrize(
    ("name", "payload", "field"),
    [
        ("provider:end", {"durationMs": 1e308}, "durationMs"),
        ("provider:end", {"costUsd": 1e300}, "costUsd"),
        ("provider:end", {"costUsd": float("nan")}, "costUsd"),
        ("provider:end", {"output": {"usage": {"inputTokens": 10**30}}}, "inputTokens"),
        ("provider:end", {"usage": {"total_tokens": -1e20}}, "total_tokens"),
        ("harness:end", {"durationMs": float("inf")}, "durationMs"),
    ],
)
def test_numbers_that_metrics_add_up_must_be_representable(
    name: str, payload: dict[str, Any], field: str
) -> None:
    error = reason_of(with_(name=name, payload=payload))
    assert error.reason == "number_out_of_range"
    assert field in error.message


def test_ordinary_usage_and_cost_are_accepted() -> None:
    payload = {"durationMs": 1200, "costUsd": 0.02, "output": {"usage": {"inputTokens": 900}}}
    assert signal_from_obj(with_(name="provider:end", payload=payload)).payload == payload


def test_seq_beyond_64_bits_is_rejected() -> None:
    assert reason_of(with_(seq=2**64)).reason == "number_out_of_range"


def test_codec_built_signals_meet_the_same_limits() -> None:
    with pytest.raises(SignalDecodeError) as info:
        check_signal(Signal("s", "e\x00", "tool:call", 1.0))
    assert info.value.reason == "bad_id_character"
    record = {"id": "c1", "episode_id": "e1", "timestamp": 1000, "durationMs": 1e308}
    with pytest.raises(SignalDecodeError) as info:
        llm_call_signals(record)
    assert info.value.reason in {"number_out_of_range", "timestamp_out_of_range"}
