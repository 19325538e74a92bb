"""The scoring run in-process: the sweep function the worker's crontab calls, and the report."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from evalstream.assertions.reports.score_report import render_score_report
from evalstream.assertions.scores.run import ScoreRunError
from evalstream.stream.score_sweep import NightlySettings, SweepError, parse_since, run_nightly
from tests.scoring.episodes import make_episode

NOW = datetime(2026, 3, 1, 6, 0, tzinfo=UTC)


def write_episodes(path: Path, costs: list[float]) -> Path:
    start = NOW - timedelta(hours=12)
    episodes = [
        make_episode(f"e{i:03d}", cost=cost, start=start + timedelta(minutes=i))
        for i, cost in enumerate(costs)
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    return path


@pytest.mark.asyncio
async def test_nightly_sweep_raises_one_windowed_alert_for_a_sustained_regression(
    tmp_path: Path,
) -> None:
    # 80 steady episodes (a reference of 50 behind a guard of 20), then 30 that cost 60 %
    # more (with a little noise).
    steady = [0.020 + 0.0001 * (i % 3) for i in range(80)]
    regressed = [0.032 + 0.0001 * (i % 3) for i in range(30)]
    source = write_episodes(tmp_path / "episodes.ndjson", steady + regressed)
    settings = NightlySettings(
        files=[str(source)],
        since=None,
        out_dir=str(tmp_path / "out"),
        regression={"reference": 50, "guard": 20, "update_interval_ms": 3_600_000},
        rolling_window=200,
        rolling_min_episodes=5,
    )
    result = await run_nightly(settings, now=NOW)
    events = [(e.state.value, e.metric, e.severity.value) for e in result.run.regressions]
    cost_events = [e for e in events if e[1] == "cost_per_episode_usd"]
    # One alert: its CUSUM crosses within a few episodes, the +60 % rise is CRITICAL, and
    # it stays firing (no update: nothing moved materially).
    assert cost_events == [("firing", "cost_per_episode_usd", "critical")]
    assert result.exit_code == 1
    assert result.json_path == tmp_path / "out" / "score-20260301T060000Z.json"
    obj = json.loads(result.json_path.read_text())
    assert obj["summary"]["critical_regressions"] >= 1
    markdown = result.markdown_path.read_text()
    assert "## Windowed regressions" in markdown
    assert "| firing | CRITICAL | support-bot/default | cost_per_episode_usd |" in markdown


@pytest.mark.asyncio
async def test_a_clean_sweep_exits_zero_and_can_be_told_never_to_fail(tmp_path: Path) -> None:
    source = write_episodes(tmp_path / "episodes.ndjson", [0.02] * 8)
    settings = NightlySettings(files=[str(source)], since=None, out_dir=str(tmp_path))
    result = await run_nightly(settings, now=NOW)
    assert result.exit_code == 0
    assert result.run.regressions == []
    assert result.run.episodes == [], "a nightly sweep streams its episodes out"
    obj = json.loads(result.json_path.read_text())
    assert [e["passed"] for e in obj["episodes"]] == [True] * 8
    assert result.markdown_path.read_text().count("| yes |") == 8
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".evalstream-score")]

    pricey = write_episodes(tmp_path / "pricey.ndjson", [0.02] * 6 + [0.2])
    never = NightlySettings(files=[str(pricey)], since=None, out_dir=str(tmp_path), fail_on="never")
    assert (await run_nightly(never, now=NOW)).exit_code == 0


@pytest.mark.asyncio
async def test_rolling_baseline_state_carries_over_between_runs(tmp_path: Path) -> None:
    state = tmp_path / "baselines.json"
    first = write_episodes(tmp_path / "first.ndjson", [0.02] * 5)
    settings = NightlySettings(
        files=[str(first)], since=None, out_dir=str(tmp_path), baseline_state=str(state)
    )
    run1 = (await run_nightly(settings, now=NOW)).run
    assert all(e.scores.baseline is None for e in run1.episodes)
    assert state.exists()
    second = tmp_path / "second.ndjson"
    second.write_text(json.dumps(make_episode("next", cost=0.03)) + "\n")
    settings2 = settings.model_copy(update={"files": [str(second)]})
    [scored] = (await run_nightly(settings2, now=NOW)).run.episodes
    assert scored.scores.cost_delta_pct == 50.0  # against the five of the first run


@pytest.mark.asyncio
async def test_rerunning_a_window_gives_the_same_results_and_exit_code(tmp_path: Path) -> None:
    state = tmp_path / "baselines.json"
    window = write_episodes(tmp_path / "night.ndjson", [0.02] * 5 + [0.05])
    settings = NightlySettings(
        files=[str(window)], since=None, out_dir=str(tmp_path), baseline_state=str(state)
    )
    first = await run_nightly(settings, now=NOW)
    saved = state.read_bytes()
    again = await run_nightly(settings, now=NOW)
    assert first.exit_code == again.exit_code == 1  # the last one costs +150 %: CRITICAL
    assert [e.to_json() for e in again.run.episodes] == [e.to_json() for e in first.run.episodes]
    assert state.read_bytes() == saved
    current = json.loads(saved)["current"]
    [key] = current["keys"]
    ids = [e["episode_id"] for e in key["entries"]]
    assert ids == [f"e{i:03d}" for i in range(6)]  # each episode once

    # The next window continues from the state; an episode seen before is not added again.
    later = tmp_path / "later.ndjson"
    later.write_text(
        "".join(
            json.dumps(make_episode(i, cost=0.02, start=NOW - timedelta(hours=1))) + "\n"
            for i in ("e005", "next")
        )
    )
    cont = await run_nightly(settings.model_copy(update={"files": [str(later)]}), now=NOW)
    scored = {e.inp.episode_id: e for e in cont.run.episodes}
    # e005 left the state before being scored again: compared with e000..e004 only.
    assert scored["e005"].scores.cost_delta_pct == 0.0
    [key] = json.loads(state.read_bytes())["current"]["keys"]
    assert [e["episode_id"] for e in key["entries"]] == [f"e{i:03d}" for i in range(5)] + [
        "e005",
        "next",
    ]


@pytest.mark.asyncio
async def test_a_state_file_of_the_older_shape_is_read_as_the_current_state(
    tmp_path: Path,
) -> None:
    state = tmp_path / "baselines.json"
    first = write_episodes(tmp_path / "first.ndjson", [0.02] * 5)
    settings = NightlySettings(
        files=[str(first)], since=None, out_dir=str(tmp_path), baseline_state=str(state)
    )
    await run_nightly(settings, now=NOW)
    state.write_text(json.dumps(json.loads(state.read_text())["current"]))  # the bare baselines
    second = tmp_path / "second.ndjson"
    second.write_text(json.dumps(make_episode("next", cost=0.03)) + "\n")
    [scored] = (
        await run_nightly(settings.model_copy(update={"files": [str(second)]}), now=NOW)
    ).run.episodes
    assert scored.scores.cost_delta_pct == 50.0
    assert json.loads(state.read_text())["kind"] == "rolling-baseline-state"


def test_parse_since() -> None:
    assert parse_since("24h", NOW) == NOW - timedelta(hours=24)
    assert parse_since("90m", NOW) == NOW - timedelta(minutes=90)
    assert parse_since("7d", NOW) == NOW - timedelta(days=7)
    assert parse_since("2026-02-01T00:00:00Z", NOW) == datetime(2026, 2, 1, tzinfo=UTC)
    with pytest.raises(SweepError, match="neither a duration"):
        parse_since("last week", NOW)


def test_settings_errors_name_the_fix() -> None:
    with pytest.raises(SweepError, match="baseline `file` needs --baseline FILE"):
        NightlySettings.load(None, {"files": ["x"], "baseline": "file"})
    with pytest.raises(SweepError, match="--baseline-state keeps a rolling baseline"):
        NightlySettings.load(None, {"files": ["x"], "baseline": "none", "baseline_state": "s"})
    with pytest.raises(SweepError, match="fail_on"):
        NightlySettings.load(None, {"files": ["x"], "fail_on": "sometimes"})


def test_report_rejects_other_kinds_and_formats() -> None:
    run = {"kind": "score-run", "version": 1, "summary": {}, "episodes": []}
    assert render_score_report(run, "markdown").startswith("# evalstream score run")
    with pytest.raises(ScoreRunError, match="unknown report format 'html'; valid: markdown, json"):
        render_score_report(run, "html")
    with pytest.raises(ScoreRunError, match="`kind` is 'eval-run', not 'score-run'"):
        render_score_report({**run, "kind": "eval-run"})
    with pytest.raises(ScoreRunError, match="version 2 is not supported"):
        render_score_report({**run, "version": 2})
    with pytest.raises(ScoreRunError, match="needs `episodes`"):
        render_score_report({"kind": "score-run", "version": 1, "summary": {}})
