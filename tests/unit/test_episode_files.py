"""Episode files: every accepted shape gives the same items (where, episode or the problem),
NDJSON read line by line and JSON documents releasing each episode once it is taken."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import orjson
import pytest

from evalstream.connectors.files import episode_files as ef
from evalstream.connectors.files.episode_files import (
    EpisodeFileError,
    FileItem,
    FileProblem,
    read_episode_file,
)

A = {"episode_id": "a", "steps": []}
B = {"episode_id": "b", "steps": [{"step_type": "llm_call"}]}


def _items(path: Path) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for item in read_episode_file(path):
        if isinstance(item, FileItem):
            out.append((item.where, item.episode))
        else:
            out.append((item.where, str(item.error)))
    return out


CASES: dict[str, tuple[bytes, list[tuple[str, Any]]]] = {
    "array": (orjson.dumps([A, B]), [("[#0]", A), ("[#1]", B)]),
    "pretty array": (
        orjson.dumps([A, B], option=orjson.OPT_INDENT_2),
        [("[#0]", A), ("[#1]", B)],
    ),
    "episodes object": (orjson.dumps({"episodes": [A, B]}), [("[#0]", A), ("[#1]", B)]),
    "one episode": (orjson.dumps(A) + b"\n\n", [("", A)]),
    "ndjson": (orjson.dumps(A) + b"\n\n" + orjson.dumps(B) + b"\n", [(":1", A), (":3", B)]),
    "ndjson crlf": (orjson.dumps(A) + b"\r\n" + orjson.dumps(B), [(":1", A), (":2", B)]),
    "ndjson cr": (orjson.dumps(A) + b"\r" + orjson.dumps(B) + b"\r", [(":1", A), (":2", B)]),
    "bad first line": (
        b"{nope\n" + orjson.dumps(B) + b"\n",
        [(":1", "not valid JSON"), (":2", B)],
    ),
    "bad middle line": (
        b"\n" + orjson.dumps(A) + b"\n[1,\n" + orjson.dumps(B),
        [(":2", A), (":3", "not valid JSON"), (":4", B)],
    ),
    "scalar lines": (b"1\n2\n", [(":1", 1), (":2", 2)]),
    "empty": (b"\n  \n", []),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("big", [False, True], ids=["read-whole", "streamed"])
def test_every_shape_gives_its_items(
    tmp_path: Path, monkeypatch: Any, name: str, big: bool
) -> None:
    if big:  # as a file too big to hold: NDJSON line by line (arrays always stream)
        monkeypatch.setattr("evalstream.connectors.files.episode_files.STREAM_MIN_BYTES", 0)
        monkeypatch.setattr("evalstream.connectors.files.episode_files.STREAM_CHUNK", 3)
    content, expected = CASES[name]
    path = tmp_path / "episodes"
    path.write_bytes(content)
    got = _items(path)
    assert [where for where, _ in got] == [f"{path}{suffix}" for suffix, _ in expected]
    for (_, value), (_, wanted) in zip(got, expected, strict=True):
        if isinstance(wanted, str) and isinstance(value, str):
            assert wanted in value
        else:
            assert value == wanted


def test_a_missing_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(EpisodeFileError, match="cannot read the episode file"):
        list(read_episode_file(tmp_path / "missing.json"))


class _Episode(dict[str, Any]):
    """A dict that can be weakly referenced, to see when the reader lets go of it."""


def test_a_json_document_lets_go_of_each_episode_once_taken(
    tmp_path: Path, monkeypatch: Any
) -> None:
    path = tmp_path / "episodes.json"
    path.write_bytes(orjson.dumps({"episodes": [A, B, A]}))
    refs: list[weakref.ref[_Episode]] = []
    real_loads = orjson.loads

    def loads(data: bytes) -> Any:  # the last document read is the one iterated
        doc = {"episodes": [_Episode(e) for e in real_loads(data)["episodes"]]}
        refs[:] = [weakref.ref(e) for e in doc["episodes"]]
        return doc

    monkeypatch.setattr("evalstream.connectors.files.episode_files.orjson.loads", loads)
    items = read_episode_file(path)
    first = next(items)
    assert isinstance(first, FileItem)
    del first
    next(items)
    gc.collect()
    assert refs[0]() is None, "the first episode is still held by the reader"
    assert refs[2]() is not None  # not read yet


def test_problems_are_items_not_exceptions(tmp_path: Path) -> None:
    path = tmp_path / "episodes.ndjson"
    path.write_bytes(b"{bad\n{worse\n")
    items = list(read_episode_file(path))
    assert all(isinstance(i, FileProblem) for i in items)
    assert len(items) == 2


@pytest.mark.parametrize("name", [n for n in CASES if n in ("array", "pretty array")])
@pytest.mark.parametrize("chunk", [1, 7, 64, 1_000_000])
def test_an_array_is_read_element_by_element_with_the_same_items(
    tmp_path: Path, monkeypatch: Any, name: str, chunk: int
) -> None:
    monkeypatch.setattr("evalstream.connectors.files.episode_files.STREAM_CHUNK", chunk)
    whole = tmp_path / "whole.json"
    note = 'é ] , [ \\" {'  # brackets, commas, an escaped quote inside a string
    episodes = [A, B, {"episode_id": "c", "note": note, "n": [1.5e300, -0.0, 2**62]}]
    content = orjson.dumps(episodes, option=orjson.OPT_INDENT_2 if "pretty" in name else 0)
    whole.write_bytes(b"\n " + content + b" \n")
    got = _items(whole)
    assert got == [(f"{whole}[#{i}]", e) for i, e in enumerate(episodes)]
    empty = tmp_path / "empty.json"
    empty.write_bytes(b" [ \n ] ")
    assert _items(empty) == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'[{"a": 1}, {"b": ', "not valid JSON in [#1]"),
        (b'[{"a": 1} {"b": 2}]', "`]` expected after [#0]"),
        (b'[{"a": 1}] x', "text after the closing"),
        (b'[{"a": NaN}]', "not valid JSON in [#0]"),
    ],
)
def test_an_array_that_is_not_json_is_one_error(
    tmp_path: Path, monkeypatch: Any, content: bytes, message: str
) -> None:
    monkeypatch.setattr("evalstream.connectors.files.episode_files.STREAM_CHUNK", 5)
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(EpisodeFileError, match=message.replace("[", r"\[").replace("]", r"\]")):
        list(read_episode_file(path))


def test_an_array_that_is_not_utf8_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'[{"episode_id": "a"}, {"episode_id": "caf\xe9"}]')
    with pytest.raises(EpisodeFileError, match="not UTF-8 text"):
        list(read_episode_file(path))


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 8, 1000])
def test_values_cut_by_a_chunk_are_read_whole(tmp_path: Path, monkeypatch: Any, chunk: int) -> None:
    monkeypatch.setattr("evalstream.connectors.files.episode_files.STREAM_CHUNK", chunk)
    values = [123456, 7, True, False, None, -1.5e-7, "\u00e9\\", {"k": [True, 1]}]
    path = tmp_path / "values.json"
    path.write_bytes(orjson.dumps(values))
    assert [v for _, v in _items(path)] == values


@pytest.mark.parametrize(
    ("element", "message"),
    [
        (b'{"case": 1e400}', "infinity"),
        (b'{"id": "x\\ud800y"}', "surrogate"),
        (b'{"a": NaN}', "not valid JSON in"),
    ],
)
def test_an_array_rejects_what_every_other_episode_file_rejects(
    tmp_path: Path, element: bytes, message: str
) -> None:
    """Each element is parsed by orjson, as NDJSON lines and small documents are."""
    path = tmp_path / "odd.json"
    path.write_bytes(b"[" + element + b"]")
    with pytest.raises(EpisodeFileError, match=message):
        list(read_episode_file(path))
    line = tmp_path / "odd.ndjson"
    line.write_bytes(element + b"\n" + element + b"\n")
    assert all(isinstance(i, FileProblem) for i in read_episode_file(line))


def test_a_big_integer_reads_as_in_ndjson(tmp_path: Path) -> None:
    episode = b'{"episode_id": "a", "n": 1000000000000000000000000000000}'
    array, lines = tmp_path / "big.json", tmp_path / "big.ndjson"
    array.write_bytes(b"[" + episode + b"]")
    lines.write_bytes(episode + b"\n" + episode + b"\n")
    from_array = [v for _, v in _items(array)]
    from_lines = [v for _, v in _items(lines)]
    assert from_array == from_lines[:1]


def test_a_bad_element_does_not_read_the_rest_of_the_file(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr("evalstream.connectors.files.episode_files.STREAM_CHUNK", 64)
    path = tmp_path / "bad-early.json"
    path.write_bytes(b'[{"a": 1}, {"b": oops}, ' + orjson.dumps([A] * 2000)[1:])
    reads = 0
    real_more = ef._ArrayReader.more

    def more(self: Any) -> bool:
        nonlocal reads
        reads += 1
        return real_more(self)

    monkeypatch.setattr(ef._ArrayReader, "more", more)
    with pytest.raises(EpisodeFileError, match=r"in \[#1\]"):
        list(read_episode_file(path))
    assert reads < 5, f"{reads} chunks read to find an error in the first 30 bytes"
