"""Decoded episodes survive a sorted run on disk unchanged, and come back in start order."""

from __future__ import annotations

import dataclasses
import marshal
import random
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from evalstream.assertions.evaluation.facts import EpisodeMetrics
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.codecs.store_results import StoreResult
from evalstream.stream.episode_sort import (
    DecodedEpisode,
    EpisodeSorter,
    _from_plain,
    _plain,
    read_episodes,
    write_episode,
)
from evalstream.stream.score_sweep import ScoreSettings, _decode
from evalstream.stream.scored_records import RecordSpill, ScratchError
from tests.scoring.test_score_shards import _episodes

JSON = Any


def _decoded(seed: int, *, direct: bool = True) -> list[DecodedEpisode]:
    settings = ScoreSettings.build({"files": ["unused.json"]})
    out = []
    for obj in _episodes(seed=seed, count=60):
        if isinstance(obj, dict) and obj.get("agent_id") and obj.get("steps"):
            out.append(_decode(obj, "f[#0]", "f[#0]: episode", settings, direct=direct))
    return out


def _fields(item: DecodedEpisode) -> JSON:
    """The item's values (a signal compares by identity: by its slots here)."""
    signals = None
    if item.signals is not None:
        signals = [{k: getattr(s, k) for k in Signal.__slots__} for s in item.signals]
    return (item.where, item.episode_id, item.start, item.attrs, item.running, signals, item.direct)


def _round_trip(tmp_path: Path, items: list[DecodedEpisode]) -> list[DecodedEpisode]:
    path = tmp_path / "run"
    with path.open("wb") as out:
        for item in items:
            write_episode(item, out)
    return list(read_episodes(str(path)))


def test_direct_and_signal_episodes_come_back_equal(tmp_path: Path) -> None:
    items = _decoded(1) + _decoded(2, direct=False)
    assert any(i.signals is not None for i in items)
    assert any(i.direct is not None for i in items)
    back = _round_trip(tmp_path, items)
    assert [_fields(i) for i in back] == [_fields(i) for i in items]
    for item in back:
        if item.direct is not None:
            assert item.direct.result.attrs is item.attrs, "one mapping, as when decoded"


def test_values_marshal_cannot_write_fall_back_to_pickle(tmp_path: Path) -> None:
    item = _decoded(3)[0]
    assert item.direct is not None
    odd = {**item.attrs, "nested": {"deep": [1, 2.5, None, True, -0.0, float("inf")]}}
    result = item.direct.result
    result.attrs = odd
    plain = DecodedEpisode(item.where, item.episode_id, item.start, odd, False, direct=item.direct)
    result_proxy = DecodedEpisode(
        item.where, item.episode_id, item.start, MappingProxyType(odd), False, direct=item.direct
    )
    back = _round_trip(tmp_path, [plain, result_proxy])
    assert back == [plain, result_proxy]
    assert back[0].attrs["nested"]["deep"][4] == 0.0
    assert str(back[0].attrs["nested"]["deep"][4]) == "-0.0"


def test_the_sorter_returns_every_episode_in_start_order(tmp_path: Path) -> None:
    items = _decoded(4) + _decoded(5)
    rng = random.Random(7)
    rng.shuffle(items)
    sorter = EpisodeSorter(str(tmp_path), run_size=9)
    for item in items:
        sorter.add(item)
    assert len(items) % 9 != 1
    assert len(list(tmp_path.iterdir())) == (len(items) - 1) // 9, "the last run waits"
    out = list(sorter.in_order())
    assert out == sorted(items, key=lambda i: i.place)
    assert not list(tmp_path.iterdir()), "each sorted run is removed once merged"


def test_an_input_that_fits_one_run_is_never_written(tmp_path: Path) -> None:
    items = _decoded(9)
    sorter = EpisodeSorter(str(tmp_path), run_size=len(items))
    for item in reversed(items):
        sorter.add(item)
    assert not list(tmp_path.iterdir())
    assert list(sorter.in_order()) == sorted(items, key=lambda i: i.place)
    sorter.add(items[0])
    sorter.add(items[1])
    assert not list(tmp_path.iterdir()), "a sort read out starts empty"


def test_without_a_directory_everything_waits_in_memory(tmp_path: Path) -> None:
    items = _decoded(6)
    sorter = EpisodeSorter(None, run_size=0)
    for item in reversed(items):
        sorter.add(item)
    assert list(sorter.in_order()) == sorted(items, key=lambda i: i.place)


def test_a_scratch_directory_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    gone.rmdir()
    sorter = EpisodeSorter(str(gone), run_size=2)
    items = _decoded(8)
    sorter.add(items[0])
    sorter.add(items[1])
    with pytest.raises(ScratchError, match=r"cannot write the run's scratch files in .*gone"):
        sorter.add(items[2])
    with pytest.raises(ScratchError, match="free space there"):
        RecordSpill(str(gone))


def _distinct(cls: type, skip: dict[str, JSON]) -> JSON:
    """An instance of dataclass `cls` with every field set to a value no other field has
    (`skip`: fields given), so that a field the plain encoding leaves out comes back wrong."""
    values = {}
    for number, f in enumerate(dataclasses.fields(cls)):
        if f.name in skip:
            values[f.name] = skip[f.name]
        elif "list" in str(f.type):
            values[f.name] = [f"{f.name}-{number}"]
        elif "dict" in str(f.type):
            values[f.name] = {f.name: number}
        elif "float" in str(f.type):
            values[f.name] = number + 0.5
        elif "int" in str(f.type):
            values[f.name] = number + 1000
        elif "bool" in str(f.type):
            values[f.name] = True
        else:
            values[f.name] = f"{f.name}-{number}"
    return cls(**values)


def test_every_field_of_a_direct_episode_is_written() -> None:
    """The plain encoding lists the fields of these classes by hand: one added to any of
    them without being added there comes back changed (or fails to come back)."""
    attrs: dict[str, JSON] = {"agent_id": "a-1", "run_id": "r"}
    metrics = _distinct(EpisodeMetrics, {})
    result = _distinct(EpisodeResult, {"assertions": [], "metrics": metrics, "attrs": attrs})
    found = _distinct(StoreResult, {"result": result})
    given = {"attrs": attrs, "signals": None, "direct": found, "episode_id": result.episode_id}
    item = _distinct(DecodedEpisode, given)
    plain = _plain(item)
    assert plain is not None, "a direct episode must take the plain encoding"
    assert _from_plain(marshal.loads(marshal.dumps(plain))) == item
    # The encoding writes the id once: an item whose result has another id is pickled.
    assert _plain(dataclasses.replace(item, episode_id="another")) is None
