"""A streamed `evalstream score` (no episode kept once scored) writes exactly the results file
of a run that holds every episode.

The inputs are those of the sharded-run tests (several agents, variants and cases; regressed
episodes firing windowed regressions; bad, running and late episodes), shuffled, in start
order or newest first (as the store pages), sorted in small runs spilled to disk.
"""

from __future__ import annotations

import asyncio
import math
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from evalstream.assertions.reports.score_report import render_markdown
from evalstream.assertions.reports.score_run_json import score_run_json
from evalstream.assertions.scores.baselines import FileBaselines
from evalstream.assertions.scores.dimensions import ScoringInput
from evalstream.assertions.scores.run import ScoreRun, summarise
from evalstream.assertions.scores.run_tally import ExactSum, RunTally
from evalstream.assertions.scores.worst_episodes import WorstEpisodes, listing_key
from evalstream.stream.cli import cli
from evalstream.stream.episode_sort import EpisodeSorter
from evalstream.stream.score_sweep import ScoreSettings, StreamPlan, score_episodes
from tests.scoring.episodes import T0, make_episode
from tests.scoring.test_score_shards import SMALL_DETECTOR, _episodes, _write
from tests.support_store import EpisodeStoreServer

JSON = Any
NOW = T0 + timedelta(days=30)

BASELINES: list[dict[str, JSON]] = [
    {"baseline": "run", "baseline_run": "baseline"},
    {},  # rolling
    {"baseline": "rolling", "rolling_window": 5, "rolling_min_episodes": 2},
    {"baseline": "none"},
]


def _start_of(item: JSON) -> tuple[str, str]:
    """An input item's place in start order (items that are not episodes last)."""
    if isinstance(item, dict) and item.get("steps"):
        return str(item["steps"][0]["timestamp"]), str(item["episode_id"])
    return "~", ""


def _run(stream: StreamPlan | None, **values: JSON) -> ScoreRun:
    values.setdefault("regression", SMALL_DETECTOR)
    settings = ScoreSettings.build(values)
    return asyncio.run(score_episodes(settings, now=NOW, stream=stream))


def _results(run: ScoreRun) -> bytes:
    return score_run_json(run, run.summary())


def _report(run: ScoreRun) -> str:
    """The run's Markdown report (a streamed run's from the episodes it picked)."""
    listed = run.tally.listed_records() if run.tally is not None else None
    return render_markdown(run.to_json(run.summary(), episodes=listed is None), listed)


@pytest.fixture
def spills(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many episodes each sorted run spilled to disk held."""
    held: list[int] = []
    real = EpisodeSorter._spill

    def spy(sorter: EpisodeSorter) -> None:
        held.append(len(sorter.waiting))
        real(sorter)

    monkeypatch.setattr(EpisodeSorter, "_spill", spy)
    return held


def _same_as_held(tmp_path: Path, run_size: int, **values: JSON) -> ScoreRun:
    """Score streamed and held; assert the same results file, summary and exit code, and
    that only the records' spill files are left in the scratch directory."""
    held = _run(None, **values)
    assert held.tally is None
    assert held.episodes
    scratch = tmp_path / f"scratch-{len(list(tmp_path.iterdir()))}"
    scratch.mkdir()
    streamed = _run(StreamPlan(str(scratch), run_size=run_size, listed=True), **values)
    assert streamed.tally is not None
    assert not streamed.episodes, "a streamed run keeps no scored episode"
    assert _results(streamed) == _results(held)
    assert _report(streamed) == _report(held)
    assert streamed.summary() == held.summary()
    assert streamed.exit_code() == held.exit_code()
    assert all(p.name.startswith("records-") for p in scratch.iterdir())
    return streamed


@pytest.mark.parametrize("baseline", BASELINES, ids=["run", "rolling", "rolling-5", "none"])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("ndjson", [False, True], ids=["json", "ndjson"])
def test_a_streamed_run_writes_the_results_of_a_run_holding_every_episode(
    tmp_path: Path, baseline: dict[str, JSON], workers: int, ndjson: bool, spills: list[int]
) -> None:
    path = _write(tmp_path, _episodes(seed=21), ndjson=ndjson)  # shuffled
    streamed = _same_as_held(tmp_path, 50, files=[path], workers=workers, **baseline)
    assert streamed.summary()["episodes"] > 700
    assert streamed.summary()["rejected"] >= 2
    if baseline.get("baseline") != "none":
        assert streamed.regressions
    assert len(spills) >= 700 // 50 // workers, "the episodes must have been sorted in runs on disk"
    assert set(spills) == {50}


def test_input_in_start_order_and_newest_first(tmp_path: Path, spills: list[int]) -> None:
    episodes = sorted(_episodes(seed=22), key=_start_of)
    for order in (episodes, episodes[::-1]):
        path = _write(tmp_path, order)
        _same_as_held(tmp_path, 7, files=[path], baseline="run", baseline_run="baseline")
    assert spills


def test_a_baseline_run_listed_last(tmp_path: Path) -> None:
    episodes = sorted(_episodes(seed=24), key=_start_of)
    episodes.append(make_episode("base-late", agent="agent-1", run_id="baseline", start=T0))
    path = _write(tmp_path, episodes)
    _same_as_held(tmp_path, 10, files=[path], baseline="run", baseline_run="baseline")


def test_repeated_ids_keep_their_first_copy(tmp_path: Path) -> None:
    episodes = _episodes(seed=9, repeated_ids=True)
    first_agent: dict[str, str] = {}
    for e in episodes:
        if isinstance(e, dict) and e.get("agent_id") and e.get("steps"):
            first_agent.setdefault(e["episode_id"], e["agent_id"])
    path = _write(tmp_path, episodes)
    for workers in (1, 2):
        streamed = _same_as_held(
            tmp_path, 20, files=[path], workers=workers, baseline="run", baseline_run="baseline"
        )
        records = orjson.loads(_results(streamed))["episodes"]
        ids = [r["episode_id"] for r in records]
        assert len(ids) == len(set(ids)), "each id scored once"
        for record in records:
            if record["episode_id"] in ("ep-0005", "ep-0300"):  # listed twice, agents differ
                assert record["agent_id"] == first_agent[record["episode_id"]]
        assert "ep-0007" not in ids, "its first copy is in the baseline run, so not scored"


def test_fixed_baselines_with_rejections_while_scoring(tmp_path: Path) -> None:
    """An agent without a fixed baseline is rejected while scoring; streamed, those
    rejections still come after every rejection made while reading."""
    episodes = sorted(_episodes(seed=25), key=_start_of)
    inputs = [
        ScoringInput(
            episode_id=f"b-{a}",
            attrs={"agent_id": f"agent-{a}", "case_id": "refund"},
            cost_usd=0.02,
            latency_ms=4000.0,
            tool_names=("search", "refund"),
        )
        for a in range(4)  # agent-4 and agent-new have none
    ]
    baseline_file = tmp_path / "baselines.json"
    baseline_file.write_bytes(
        orjson.dumps(FileBaselines.from_results(inputs, source="test").to_json())
    )
    values: dict[str, JSON] = {"baseline": "file", "baseline_file": str(baseline_file)}
    path = _write(tmp_path, episodes)
    for workers in (1, 2, 3):
        streamed = _same_as_held(tmp_path, 4, files=[path], workers=workers, **values)
        reasons = [r.reason for r in streamed.rejected]
        mismatches = [i for i, reason in enumerate(reasons) if reason == "baseline_mismatch"]
        read_time = [i for i, reason in enumerate(reasons) if reason != "baseline_mismatch"]
        assert mismatches
        assert read_time
        assert max(read_time) < min(mismatches)


def test_a_store_paged_newest_first(tmp_path: Path, spills: list[int]) -> None:
    with EpisodeStoreServer() as store:
        for episode in _episodes(seed=30, count=300):
            if isinstance(episode, dict) and episode.get("agent_id") and episode.get("steps"):
                store.add(episode)
        values: dict[str, JSON] = {"store_url": store.url, "limit": 10_000}
        streamed = _same_as_held(tmp_path, 25, **values)
    assert streamed.summary()["episodes"] > 250
    assert spills


def test_no_records_without_a_results_file(tmp_path: Path) -> None:
    path = _write(tmp_path, sorted(_episodes(seed=26), key=_start_of))
    held = _run(None, files=[path])
    streamed = _run(StreamPlan(str(tmp_path), records=False, run_size=3), files=[path])
    assert streamed.rendered_episodes is None
    assert streamed.summary() == held.summary()
    with pytest.raises(Exception, match="streamed out"):
        score_run_json(streamed)


def test_the_score_command_streams_and_leaves_no_scratch_files(tmp_path: Path) -> None:
    path = _write(tmp_path, sorted(_episodes(seed=27), key=_start_of))
    out = tmp_path / "out" / "results.json"
    out.parent.mkdir()
    streamed_md = out.parent / "report.md"
    streamed = CliRunner().invoke(
        cli, ["score", path, "--output", str(out), "--markdown", str(streamed_md)]
    )
    assert streamed.exit_code == 2, streamed.output  # the two bad items
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.md", "results.json"]
    held_md = tmp_path / "held.md"
    held_out = tmp_path / "held.json"
    saved = tmp_path / "baseline.json"  # a saved baseline needs every episode: held
    held_args = ["score", path, "--output", str(held_out), "--markdown", str(held_md)]
    held = CliRunner().invoke(cli, [*held_args, "--save-baseline", str(saved)])
    assert held.exit_code == streamed.exit_code
    assert held.output == streamed.output
    assert saved.exists()

    def without_heading(p: Path) -> list[str]:
        return p.read_text().splitlines()[1:]  # the heading names the run's time

    assert without_heading(streamed_md) == without_heading(held_md)
    assert "more episodes in the JSON results" in held_md.read_text()

    def without_time(p: Path) -> JSON:
        obj = orjson.loads(p.read_bytes())
        obj.pop("created_at")
        return obj

    assert without_time(out) == without_time(held_out)
    assert without_time(out)["summary"]["episodes"] > 700


def test_an_output_in_a_missing_directory_is_named_before_scoring(tmp_path: Path) -> None:
    path = _write(tmp_path, _episodes(seed=28, count=20))
    missing = tmp_path / "nowhere" / "results.json"
    result = CliRunner().invoke(cli, ["score", path, "--output", str(missing)])
    assert result.exit_code == 2
    assert "cannot write beside the results file" in result.output
    assert "writable" in result.output


def test_the_tally_summarises_exactly_as_the_whole_list(tmp_path: Path) -> None:
    """The tally of every episode (and of a random split of them, merged) is `summarise`
    of the list, means to the last bit."""
    path = _write(tmp_path, _episodes(seed=29))
    run = _run(None, files=[path], baseline="rolling", rolling_window=5, rolling_min_episodes=2)
    expected = summarise(run.episodes, run.regressions, run.rejected, run.skipped)
    places = [(float(i), e.inp.episode_id) for i, e in enumerate(run.episodes)]
    whole = RunTally()
    parts = [RunTally(), RunTally(), RunTally()]
    rng = random.Random(3)
    for place, episode in zip(places, run.episodes, strict=True):
        whole.add(episode, place)
        rng.choice(parts).add(episode, place)
    assert whole.summary(run.regressions, run.rejected, run.skipped) == expected
    merged = RunTally.merged(parts)
    assert merged.summary(run.regressions, run.rejected, run.skipped) == expected
    assert whole.first_attrs is run.episodes[0].inp.attrs
    assert merged.first_attrs is run.episodes[0].inp.attrs
    assert merged.evaluated == whole.evaluated == sum(1 for e in run.episodes if e.assertions)


def test_exact_sums_where_plain_addition_rounds() -> None:
    rng = random.Random(11)
    values = [rng.choice((1e16, -1e16, 1.0, 0.1, 1e-16, 3.3)) for _ in range(5_000)]
    total = ExactSum()
    for v in values:
        total.add(v)
    assert total.mean() == math.fsum(values) / len(values)
    assert sum(values) != math.fsum(values), "the values must make plain addition round"
    special = ExactSum()
    for v in (1.0, math.inf, 2.0):
        special.add(v)
    assert special.mean() == math.inf


@pytest.mark.parametrize("limit", [1, 7, 50, 2_000])
def test_the_picked_episodes_are_the_first_of_a_sort_of_the_whole_run(
    tmp_path: Path, limit: int
) -> None:
    """Picked one by one (and by a random split of the run, merged), the listed episodes are
    the first `limit` of the whole run sorted by listing key, ties in the run's order."""
    path = _write(tmp_path, _episodes(seed=30))
    run = _run(None, files=[path], baseline="run", baseline_run="baseline")
    keys = {listing_key(e.passed, e.scores.overall) for e in run.episodes}
    assert len(keys) < len(run.episodes) / 2, "the episodes must tie on their listing keys"
    places = [(float(i // 3), e.inp.episode_id) for i, e in enumerate(run.episodes)]
    ranked = sorted(
        zip(places, run.episodes, strict=True),
        key=lambda pair: (listing_key(pair[1].passed, pair[1].scores.overall), pair[0]),
    )
    expected = [episode.to_json() for _, episode in ranked[:limit]]
    whole = WorstEpisodes(limit=limit)
    parts = [WorstEpisodes(limit=limit) for _ in range(3)]
    rng = random.Random(limit)
    for place, episode in zip(places, run.episodes, strict=True):
        whole.offer(episode, place)
        rng.choice(parts).offer(episode, place)
    assert whole.records() == expected
    assert WorstEpisodes.merged(parts).records() == expected
    assert len(whole.picked) <= limit


@pytest.mark.parametrize("baseline", BASELINES[:2], ids=["run", "rolling"])
def test_a_run_with_suites_streams_its_evaluated_episodes(
    tmp_path: Path, baseline: dict[str, JSON], spills: list[int]
) -> None:
    """Episodes evaluated against suites carry their signals through the sorted runs."""
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: refunds\nmatch: {agent_id: agent-1}\n"
        "defaultAssertions:\n  - type: tool.called\n    name: refund\n"
    )
    path = _write(tmp_path, _episodes(seed=31))
    streamed = _same_as_held(tmp_path, 9, files=[path], suites=[str(suite)], **baseline)
    assert spills, "the episodes must have been sorted in runs on disk"
    assert streamed.tally is not None
    assert 0 < streamed.evaluated_count < streamed.episode_count
    assert streamed.first_attrs is not None


def test_a_streamed_run_names_its_first_episode_when_no_assertion_applied(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "typo.yaml"
    suite.write_text(
        "name: refunds\nmatch: {agent_id: nobody}\n"
        "defaultAssertions:\n  - type: tool.called\n    name: refund\n"
    )
    episodes = [
        make_episode(f"e-{i:02d}", agent=f"agent-{i % 3}", start=T0 + timedelta(minutes=i))
        for i in range(30)
    ]
    path = _write(tmp_path, episodes[::-1])  # newest first: the first listed is not the first
    held = _run(None, files=[path], suites=[str(suite)])
    streamed = _run(StreamPlan(str(tmp_path), run_size=4), files=[path], suites=[str(suite)])
    assert streamed.evaluated_count == held.evaluated_count == 0
    assert streamed.first_attrs == held.first_attrs
    assert held.first_attrs is not None
    result = CliRunner().invoke(cli, ["score", path, "--suite", str(suite)])
    assert result.exit_code == 2
    assert held.first_attrs["agent_id"] == "agent-0"
    assert "no assertion of the suites applied to any of the 30 episode(s)" in result.output
    assert "the first has agent_id='agent-0'" in result.output
