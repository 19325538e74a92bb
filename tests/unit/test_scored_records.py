"""Spilled records come back as written, merged in place order, without piling up in memory."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

from evalstream.stream.scored_records import MergedRecords, RecordSpill, read_spill


def _spill(tmp_path: Path, frames: list[tuple[tuple[float, str], bytes]]) -> str:
    spill = RecordSpill(str(tmp_path))
    for place, record in frames:
        spill.write(place, record)
    spill.close()
    return spill.path


def test_frames_come_back_as_written(tmp_path: Path) -> None:
    frames = [
        ((1.5, "épisode-1"), b'{"a": 1}'),
        ((-0.0, ""), b""),
        ((1e300, "x" * 70_000), bytes(range(256)) * 40),
    ]
    assert list(read_spill(_spill(tmp_path, frames))) == frames


def test_shares_merge_in_place_order(tmp_path: Path) -> None:
    rng = random.Random(4)
    places = sorted({(float(rng.randrange(50)), f"ep-{rng.randrange(10**6)}") for _ in range(300)})
    shares: list[list[tuple[tuple[float, str], bytes]]] = [[], [], []]
    for place in places:
        rng.choice(shares).append((place, repr(place).encode()))
    paths = [_spill(tmp_path, share) for share in shares]
    assert list(MergedRecords(paths)) == [repr(p).encode() for p in places]
    assert list(MergedRecords(paths[:1])) == [record for _, record in shares[0]]


def test_reading_holds_one_frame_at_a_time(tmp_path: Path) -> None:
    record = b"r" * 10_000
    path = _spill(tmp_path, [((float(i), f"ep-{i}"), record) for i in range(2_000)])
    tracemalloc.start()
    try:
        count = sum(1 for _ in MergedRecords([path]))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 2_000
    assert peak < 2_000_000, f"reading 20 MB of records held {peak} bytes at once"
