"""The recording file format: byte-identical round trips, zstd, errors, episode renaming."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstream.connectors.files.recording import (
    EpisodeRename,
    RecordedMessage,
    RecordingError,
    RecordingReader,
    RecordingWriter,
    decode_message,
    encode_message,
)

header_values = st.one_of(st.none(), st.binary(max_size=20))
messages = st.builds(
    RecordedMessage,
    topic=st.text(min_size=1, max_size=10),
    partition=st.integers(0, 1000),
    offset=st.integers(0, 2**40),
    timestamp_ms=st.integers(0, 2**42),
    key=st.one_of(st.none(), st.binary(max_size=30), st.text(max_size=30).map(str.encode)),
    value=st.one_of(
        st.none(),
        st.binary(max_size=60),
        st.text(max_size=60).map(str.encode),
        st.dictionaries(
            st.text(max_size=5), st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5), max_size=4
        ).map(orjson.dumps),
    ),
    headers=st.lists(st.tuples(st.text(max_size=8), header_values), max_size=3).map(tuple),
)


@settings(max_examples=300)
@given(messages)
def test_any_message_round_trips_byte_for_byte(msg: RecordedMessage) -> None:
    line = encode_message(msg)
    assert b"\n" not in line
    assert decode_message(orjson.loads(line)) == msg


def test_values_are_readable_json_only_when_that_is_exact() -> None:
    def encoded(value: bytes) -> dict[str, object]:
        obj = orjson.loads(encode_message(RecordedMessage("t", 0, 0, 1, b"k", value)))
        assert isinstance(obj, dict)
        return obj

    compact = encoded(b'{"name":"tool:call","n":1}')
    assert compact["value"] == {"name": "tool:call", "n": 1}
    spaced = encoded(b'{"name": "tool:call"}')  # another spelling: kept as text
    assert spaced["value_text"] == '{"name": "tool:call"}'
    assert "value" not in spaced
    assert encoded(b"null")["value_text"] == "null"  # JSON null is not a tombstone
    assert encoded(b'{"big":123456789012345678901234567890}')["value_text"]
    binary = encoded(b"\xff\x00garbage")
    assert base64.b64decode(str(binary["value_b64"])) == b"\xff\x00garbage"
    tombstone = orjson.loads(encode_message(RecordedMessage("t", 0, 0, 1, None, None)))
    assert not {"value", "value_text", "value_b64"} & set(tombstone)


@pytest.mark.parametrize("name", ["rec.jsonl", "rec.jsonl.zst"])
def test_files_round_trip_and_compress_by_name(tmp_path: Path, name: str) -> None:
    msgs = [
        RecordedMessage("t", i % 3, i, 1_700_000_000_000 + i, f"ep-{i % 5}".encode(), b"x" * i)
        for i in range(2000)
    ]
    path = tmp_path / name
    with RecordingWriter(path, {"topic": "t"}) as writer:
        for msg in msgs:
            writer.write(msg)
        writer.flush()
    raw = path.read_bytes()
    compressed = raw.startswith(b"\x28\xb5\x2f\xfd")  # the zstd frame magic number
    assert compressed is name.endswith(".zst")
    if compressed:
        assert len(raw) < sum(len(m.value or b"") for m in msgs) / 10
    with RecordingReader(path) as reader:
        assert list(reader) == msgs
        assert reader.position() == path.stat().st_size


def test_concatenated_recordings_read_as_one(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl.zst", tmp_path / "b.jsonl.zst"
    for path, n in ((a, 0), (b, 1)):
        with RecordingWriter(path, {"topic": "t"}) as writer:
            writer.write(RecordedMessage("t", 0, n, 1, None, b"{}"))
    both = tmp_path / "both.jsonl.zst"
    both.write_bytes(a.read_bytes() + b.read_bytes())  # two zstd frames, two header lines
    with RecordingReader(both) as reader:
        assert [m.offset for m in reader] == [0, 1]


def test_broken_files_name_file_line_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = encode_message(RecordedMessage("t", 0, 0, 1, None, b"{}"))

    def read(path: Path) -> list[RecordedMessage]:
        with RecordingReader(path) as reader:
            return list(reader)

    path.write_bytes(good + b'\n{"topic": "t", "partition": "zero"}\n')
    with pytest.raises(RecordingError, match=r"bad\.jsonl:2: `partition` must be an integer"):
        read(path)
    path.write_bytes(good + b"\n" + good[:20])
    with pytest.raises(RecordingError, match=r":2: the last line is incomplete"):
        read(path)
    path.write_bytes(b'{"evalstream_recording": 99}\n')
    with pytest.raises(RecordingError, match="version 99 is not supported"):
        read(path)
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(zstandard.ZstdCompressor().compress(good + b"\n" * 1000)[:-6])
    with pytest.raises(RecordingError, match="ends inside a zstd frame"):
        read(cut)
    cut.write_bytes(b"\x28\xb5\x2f\xfd" + b"garbage" * 10)
    with pytest.raises(RecordingError, match="not a valid zstd stream"):
        read(cut)
    with pytest.raises(RecordingError, match="cannot read"):
        RecordingReader(tmp_path / "missing.jsonl")


def test_rename_changes_key_and_episode_field_together() -> None:
    rename = EpisodeRename(prefix="r-", suffix="-2")
    value = b'{"id":"s1","episode_id":"ep","name":"tool:call","timestamp":1}'
    msg = RecordedMessage("t", 1, 7, 5, b"ep", value, (("h", b"v"),))
    out = rename.apply(msg)
    assert out.key == b"r-ep-2"
    assert orjson.loads(out.value or b"") == {**orjson.loads(value), "episode_id": "r-ep-2"}
    assert (out.value or b"").startswith(b'{"id":"s1","episode_id":"r-ep-2"')  # order kept
    assert (out.topic, out.partition, out.offset, out.timestamp_ms, out.headers) == (
        "t",
        1,
        7,
        5,
        (("h", b"v"),),
    )
    # No episode field (signal-native shape): the key alone names the episode.
    keyed = RecordedMessage("t", 0, 0, 1, b"ep", b'{"name":"a","timestamp":1}')
    assert rename.apply(keyed).value == keyed.value
    assert rename.apply(keyed).key == b"r-ep-2"
    # Garbage stays garbage (and is dead-lettered again), keyless stays keyless.
    junk = RecordedMessage("t", 0, 0, 1, None, b"{oops")
    assert rename.apply(junk) == junk
    assert EpisodeRename().apply(msg) is msg
