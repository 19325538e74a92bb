"""A dead letter's JSON stays within the limit it is given, whatever the input's size."""

from __future__ import annotations

import base64
import hashlib

import orjson
import pytest

from evalstream.assertions.evaluation.records import DeadLetter


def letter(key: bytes | None, value: bytes) -> DeadLetter:
    return DeadLetter(
        "invalid_json", "not a JSON document", "evalstream.signals", 3, 42, key, value
    )


def test_a_letter_that_fits_keeps_the_original_bytes_whole() -> None:
    record = letter(b"ep", b"{oops").to_json(max_bytes=10_000)
    assert base64.b64decode(record["value_b64"]) == b"{oops"
    assert "value_truncated" not in record
    assert record == letter(b"ep", b"{oops").to_json()


@pytest.mark.parametrize("size", [3_000, 10_000, 900_000])
def test_a_large_value_is_cut_to_a_prefix_with_its_size_and_hash(size: int) -> None:
    value = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    record = letter(b"ep", value).to_json(max_bytes=2_000)
    assert len(orjson.dumps(record)) <= 2_000
    kept = base64.b64decode(record["value_b64"])
    assert value.startswith(kept)
    assert 1_000 < len(kept) < size
    assert record["value_truncated"] is True
    assert record["value_size"] == size
    assert record["value_sha256"] == hashlib.sha256(value).hexdigest()
    assert base64.b64decode(record["key_b64"]) == b"ep"


def test_a_huge_key_is_cut_too() -> None:
    key = b"k" * 5_000
    record = letter(key, b"v" * 5_000).to_json(max_bytes=2_000)
    assert len(orjson.dumps(record)) <= 2_000
    assert record["value_b64"] == ""
    assert record["key_truncated"] is True
    assert record["key_size"] == 5_000
    assert key.startswith(base64.b64decode(record["key_b64"]))


def test_a_message_longer_than_the_limit_is_cut_last() -> None:
    long = DeadLetter("late", "é" * 5_000, "t", 0, 1, b"k", b"v" * 3_000)
    record = long.to_json(max_bytes=2_000)
    assert len(orjson.dumps(record)) <= 2_000
    assert record["message"]
    assert record["reason"] == "late"
