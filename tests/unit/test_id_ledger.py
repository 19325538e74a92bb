"""Later copies of repeated ids are found across sorted runs on disk, as a set of ids finds them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evalstream.stream.id_ledger import IdLedger
from evalstream.stream.scored_records import ScratchError


def _later_copies_by_a_set(ids: list[str]) -> set[int]:
    seen: set[str] = set()
    later = set()
    for position, episode_id in enumerate(ids):
        if episode_id in seen:
            later.add(position)
        seen.add(episode_id)
    return later


@pytest.mark.parametrize("run_size", [1, 3, 50, 10_000])
def test_later_copies_across_runs(tmp_path: Path, run_size: int) -> None:
    rng = random.Random(run_size)
    ids = [f"ep-{rng.randrange(400)}" for _ in range(600)] + ["é", "é", ""]
    ledger = IdLedger(str(tmp_path), run_size)
    for position, episode_id in enumerate(ids):
        ledger.add(episode_id, position)
    later = ledger.later_copies()
    assert later == _later_copies_by_a_set(ids)
    assert later, "the ids must repeat"
    assert not list(tmp_path.iterdir()), "the runs are removed once merged"


def test_in_memory_without_a_directory() -> None:
    ledger = IdLedger(None, 0)
    for position, episode_id in enumerate(["b", "a", "b", "c", "a", "b"]):
        ledger.add(episode_id, position)
    assert ledger.later_copies() == {2, 4, 5}


def test_an_unwritable_scratch_directory_is_named(tmp_path: Path) -> None:
    ledger = IdLedger(str(tmp_path / "missing"), 1)
    ledger.add("a", 0)  # one run's worth waits in memory
    with pytest.raises(ScratchError, match="missing"):
        ledger.add("b", 1)
