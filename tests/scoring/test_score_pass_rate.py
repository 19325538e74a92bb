"""`evalstream score`'s windowed pass rate watches the episodes' quality outcome: a cost rise
fails each episode through its CRITICAL cost alert and fires the cost metric, not the pass
rate; failed outcomes fire the pass rate."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from evalstream.assertions.alerting.regression import COST, PASS_RATE
from evalstream.assertions.scores.run import ScoreRun
from evalstream.stream.score_sweep import ScoreSettings, score_episodes
from tests.scoring.episodes import make_episode

NOW = datetime(2026, 3, 1, 6, 0, tzinfo=UTC)
STEADY, CHANGED = 120, 60  # a reference of 50 behind a guard of 20, then the change


async def _score(tmp_path: Path, *, cost: float, status: str) -> ScoreRun:
    start = NOW - timedelta(hours=12)
    episodes = [
        make_episode(
            f"e{i:03d}",
            cost=(0.020 + 0.0002 * (i % 5)) * (cost if i >= STEADY else 1.0),
            status=status if i >= STEADY else "success",
            start=start + timedelta(minutes=i),
        )
        for i in range(STEADY + CHANGED)
    ]
    path = tmp_path / "episodes.ndjson"
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    settings = ScoreSettings(
        files=[str(path)],
        limit=None,
        regression={"reference": 50, "guard": 20, "pass_rate_reference": 50},
    )
    return await score_episodes(settings, now=NOW)


@pytest.mark.asyncio
async def test_a_cost_rise_fails_its_episodes_but_fires_only_the_cost_metric(
    tmp_path: Path,
) -> None:
    run = await _score(tmp_path, cost=2.0, status="success")
    changed = run.episodes[STEADY:]
    # The rolling baseline holds while the cost alert fires: the risen episodes fail.
    assert sum(not e.passed for e in changed) >= CHANGED - 10, [e.passed for e in changed]
    fired = {e.metric for e in run.regressions if e.state.value == "firing"}
    assert fired == {COST}, fired


@pytest.mark.asyncio
async def test_failed_outcomes_fire_the_pass_rate(tmp_path: Path) -> None:
    run = await _score(tmp_path, cost=1.0, status="failure")
    assert not any(e.passed for e in run.episodes[STEADY:])
    fired = {e.metric for e in run.regressions if e.state.value == "firing"}
    assert fired == {PASS_RATE}, fired
