"""Full collections wait during a batch command and come back after it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from evalstream.stream.batch_gc import full_collections_deferred


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*saved)


def _full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def test_no_full_collection_within_the_block(thresholds: tuple[int, int, int]) -> None:
    with full_collections_deferred():
        before = _full_collections()
        # Enough cyclic garbage for many young and middle collections.
        for _ in range(200_000):
            a: list[object] = []
            a.append(a)
        assert _full_collections() == before
        young, middle, _ = gc.get_threshold()
        assert (young, middle) == thresholds[:2]


def test_thresholds_restored_after_an_error(thresholds: tuple[int, int, int]) -> None:
    with pytest.raises(RuntimeError), full_collections_deferred():
        raise RuntimeError("batch failed")
    assert gc.get_threshold() == thresholds


def test_young_cycles_still_collected(thresholds: tuple[int, int, int]) -> None:
    with full_collections_deferred():
        collected = gc.get_stats()[0]["collected"]
        for _ in range(10_000):
            a: list[object] = []
            a.append(a)
        assert gc.get_stats()[0]["collected"] > collected
