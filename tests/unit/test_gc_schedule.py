"""The worker's collector schedule: no full collection on CPython's own schedule, the timer's
collection still frees cycles that reached the oldest generation."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from evalstream.stream.kafka_worker.gc_schedule import full_collection, schedule_full_collections


class Node:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    saved = gc.get_threshold()
    yield saved
    gc.set_threshold(*saved)


def full_collections_while_objects_pile_up() -> int:
    """Full collections CPython runs while a worker-like heap grows (objects that live long
    enough to reach the oldest generation, as open episodes' do)."""
    before: int = gc.get_stats()[2]["collections"]
    survivors = [[i] for i in range(len(gc.get_objects()) * 2)]
    after: int = gc.get_stats()[2]["collections"]
    del survivors
    return after - before


def test_zero_keeps_cpythons_schedule(thresholds: tuple[int, int, int]) -> None:
    schedule_full_collections(0)
    assert gc.get_threshold() == thresholds
    assert full_collections_while_objects_pile_up() > 0


def test_no_full_collection_on_cpythons_schedule(thresholds: tuple[int, int, int]) -> None:
    schedule_full_collections(300)
    assert full_collections_while_objects_pile_up() == 0


def test_old_cycles_wait_for_the_timers_full_collection(thresholds: tuple[int, int, int]) -> None:
    schedule_full_collections(300)
    assert gc.get_threshold()[:2] == thresholds[:2]  # young collections unchanged
    node = Node()
    alive = weakref.ref(node)
    gc.collect()  # survives: now in the oldest generation
    del node  # an unreachable cycle only a full collection frees
    for _ in range(200):  # many young and middle collections, no full one
        _ = [[i] for i in range(1_000)]
    assert alive() is not None
    assert full_collection() >= 1
    assert alive() is None
