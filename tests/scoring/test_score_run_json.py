"""The results file written from per-episode records is the whole record's JSON, byte for byte."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from evalstream.assertions.reports.score_run_json import (
    episode_json,
    score_run_json,
    write_score_run_json,
)
from evalstream.assertions.scores.run import ScoreRun
from evalstream.stream.score_sweep import ScoreSettings, score_episodes
from tests.scoring.test_score_shards import NOW, SMALL_DETECTOR, _episodes

JSON = Any


def _run(path: str, **values: JSON) -> ScoreRun:
    settings = ScoreSettings.build({"files": [path], "regression": SMALL_DETECTOR, **values})
    return asyncio.run(score_episodes(settings, now=NOW))


def _whole(run: ScoreRun) -> bytes:
    return orjson.dumps(run.to_json(), option=orjson.OPT_INDENT_2)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_spliced_file_is_the_whole_record(tmp_path: Path, workers: int) -> None:
    path = tmp_path / "episodes.json"
    path.write_bytes(orjson.dumps(_episodes(seed=3)))
    run = _run(str(path), workers=workers, baseline="run", baseline_run="baseline")
    assert isinstance(run.rendered_episodes, list)
    assert len(run.rendered_episodes) == len(run.episodes) > 700
    assert run.regressions
    assert run.rejected
    assert run.skipped
    assert score_run_json(run) == _whole(run)
    assert score_run_json(run, run.summary()) == _whole(run)
    written = tmp_path / "results.json"
    write_score_run_json(written, run)
    assert written.read_bytes() == _whole(run) + b"\n"
    run.rendered_episodes = None  # rendered here instead
    assert score_run_json(run) == _whole(run)


def test_a_run_without_episodes(tmp_path: Path) -> None:
    path = tmp_path / "episodes.json"
    path.write_bytes(orjson.dumps([{"episode_id": "x"}]))
    run = _run(str(path))
    assert not run.episodes
    assert run.rejected
    assert score_run_json(run) == _whole(run)


def test_an_episode_record_holding_the_marker_text(tmp_path: Path) -> None:
    """Text inside an episode that looks like the top-level key does not move the splice."""
    path = tmp_path / "episodes.json"
    episodes = _episodes(seed=4, count=40)
    for e in episodes:
        if isinstance(e, dict) and "metadata" in e:
            e["metadata"]["case_id"] = '\n  "episodes": [],\n'
    path.write_bytes(orjson.dumps(episodes))
    run = _run(str(path), baseline="none")
    assert run.episodes
    assert score_run_json(run) == _whole(run)
    assert episode_json(run.episodes[0]).startswith(b"    {\n      ")
