"""`evalstream score` split by agent across processes gives exactly one process's results.

Every case writes one file of store episodes (several agents, variants and cases; regressed
episodes that fire windowed regressions; bad, running and duplicated episodes) and compares
the whole score-run record of `workers` 2 and 3 with that of one process.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from evalstream.assertions.errors import InputError
from evalstream.assertions.scores.baselines import FileBaselines
from evalstream.assertions.scores.dimensions import ScoringInput
from evalstream.stream import score_shares
from evalstream.stream.process_shards import ShardError, run_shards
from evalstream.stream.score_shares import ShareResult
from evalstream.stream.score_sweep import ScoreSettings, SweepError, score_episodes, shard_count
from tests.scoring.episodes import T0, make_episode

JSON = Any
NOW = T0 + timedelta(days=30)


def _episodes(seed: int, count: int = 800, *, repeated_ids: bool = False) -> list[JSON]:
    rng = random.Random(seed)
    agents = [f"agent-{a}" for a in range(5)]
    out: list[JSON] = [
        make_episode(f"base-{a}", agent=agent, run_id="baseline", start=T0)
        for a, agent in enumerate(agents)
    ]
    for i in range(count):
        regressed = i > count // 2 and rng.random() < 0.6
        agent = agents[i % len(agents)] if rng.random() < 0.8 else agents[0]
        out.append(
            make_episode(
                f"ep-{i:04d}",
                agent=agent,
                start=T0 + timedelta(minutes=i, seconds=rng.choice((0, 0, 30))),
                cost=0.02 * (rng.uniform(1.5, 3.0) if regressed else rng.uniform(0.9, 1.1)),
                latency_ms=4000.0 * (rng.uniform(1.5, 2.5) if regressed else 1.0),
                tools=("search",) if regressed and rng.random() < 0.3 else ("search", "refund"),
                status="failure" if regressed and rng.random() < 0.2 else "success",
                case_id=rng.choice(("refund", "billing", None)),
                variant=rng.choice((None, None, None, "canary")),
                run_id="candidate",
            )
        )
    out.append({"episode_id": "no-agent", "status": "success", "steps": []})  # rejected
    out.append(["not", "an", "episode"])  # rejected
    running = make_episode("still-open", agent=agents[3], start=T0 + timedelta(minutes=3))
    running["status"] = "running"
    out.append(running)
    out.append(make_episode("late-agent", agent="agent-new", start=T0 + timedelta(minutes=1)))
    rng.shuffle(out)
    if repeated_ids:  # the same ids again, under other agents and in the baseline run
        out.append(make_episode("ep-0005", agent=agents[4], start=T0 + timedelta(minutes=2)))
        out.append(make_episode("ep-0300", agent="agent-new", start=T0 + timedelta(minutes=1)))
        out.insert(0, make_episode("ep-0007", agent=agents[2], run_id="baseline", start=T0))
    return out


def _write(tmp_path: Path, episodes: list[JSON], *, ndjson: bool = False) -> str:
    path = tmp_path / ("episodes.ndjson" if ndjson else "episodes.json")
    if ndjson:
        lines = [orjson.dumps(e) for e in episodes]
        lines.insert(17, b"{not json")
        path.write_bytes(b"\n".join(lines) + b"\n")
    else:
        path.write_bytes(orjson.dumps(episodes))
    return str(path)


# A small detector, so that a few hundred episodes fire (and resolve) windowed regressions.
SMALL_DETECTOR = {
    "reference": 30,
    "pass_rate_reference": 30,
    "guard": 10,
    "recent": 10,
    "refresh": 5,
    "cooldown_ms": 60_000.0,
}


def _score(**values: JSON) -> JSON:
    values.setdefault("regression", SMALL_DETECTOR)
    settings = ScoreSettings.build(values)
    return asyncio.run(score_episodes(settings, now=NOW)).to_json()


@pytest.fixture
def shares_merged(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many shares each run merged (1 when it fell back to one process)."""
    merged: list[int] = []
    real = score_shares.merge_shares

    def spy(shares: list[ShareResult]) -> ShareResult:
        merged.append(len(shares))
        return real(shares)

    monkeypatch.setattr("evalstream.stream.score_sweep.merge_shares", spy)
    return merged


BASELINES: list[dict[str, JSON]] = [
    {"baseline": "run", "baseline_run": "baseline"},
    {},  # rolling
    {"baseline": "rolling", "rolling_window": 5, "rolling_min_episodes": 2},
    {"baseline": "none"},
]


@pytest.mark.parametrize("baseline", BASELINES, ids=["run", "rolling", "rolling-5", "none"])
@pytest.mark.parametrize("ndjson", [False, True], ids=["json", "ndjson"])
def test_shards_give_the_single_process_results(
    tmp_path: Path, baseline: dict[str, JSON], ndjson: bool, shares_merged: list[int]
) -> None:
    path = _write(tmp_path, _episodes(seed=7), ndjson=ndjson)
    single = _score(files=[path], workers=1, **baseline)
    assert single["summary"]["episodes"] > 700
    assert single["summary"]["rejected"] >= 2
    assert single["skipped"] == [{"episode_id": "still-open", "reason": "still running"}]
    if baseline.get("baseline") != "none":
        assert single["regressions"], "the regressed half must fire windowed regressions"
    for workers in (2, 3):
        assert _score(files=[path], workers=workers, **baseline) == single
    assert shares_merged == [2, 3], "the runs must have been split, not fallen back"


def test_repeated_episode_ids_keep_the_run_in_one_process(
    tmp_path: Path, shares_merged: list[int]
) -> None:
    """Which copy of a repeated id is scored (or is part of the baseline run) depends on
    every copy, so such a run is not split."""
    path = _write(tmp_path, _episodes(seed=9, repeated_ids=True))
    values: dict[str, JSON] = {"files": [path], "baseline": "run", "baseline_run": "baseline"}
    single = _score(workers=1, **values)
    assert _score(workers=2, **values) == single
    assert shares_merged == [1]


def test_fixed_baselines_and_a_limit(tmp_path: Path) -> None:
    episodes = _episodes(seed=11)
    path = _write(tmp_path, episodes)
    baseline_file = tmp_path / "baselines.json"
    first = _score(files=[path], workers=1, baseline="run", baseline_run="baseline")
    assert first["summary"]["episodes"]
    inputs = [
        ScoringInput(
            episode_id=e["episode_id"],
            attrs={"agent_id": e["agent_id"], "case_id": e["case_id"]},
            cost_usd=e["cost_usd"] or 0.0,
            latency_ms=e["latency_ms"],
            tool_names=tuple(e["tool_calls"]),
        )
        for e in first["episodes"][:150]
    ]
    baseline_file.write_bytes(
        orjson.dumps(FileBaselines.from_results(inputs, source="test").to_json())
    )
    for values in (
        {"baseline": "file", "baseline_file": str(baseline_file)},
        {"limit": 120, "agent_id": "agent-0"},
        {"limit": 90},
    ):
        single = _score(files=[path], workers=1, **values)
        assert single["summary"]["episodes"] + single["summary"]["rejected"] > 0
        assert _score(files=[path], workers=2, **values) == single


def test_more_streams_than_a_process_keeps_falls_back_to_one_process(tmp_path: Path) -> None:
    """One regression stream allowed: agent-1's first episode evicts agent-0's firing stream
    in one process; shards (one agent each) would not, so the run goes on in one process."""
    episodes: list[JSON] = [
        make_episode(f"base-{a}", agent=f"agent-{a}", run_id="baseline", start=T0) for a in range(2)
    ]
    for i in range(160):
        regressed = i >= 80
        episodes.append(
            make_episode(
                f"ep-{i:04d}",
                agent="agent-0" if i < 150 else "agent-1",
                start=T0 + timedelta(minutes=i),
                cost=0.05 if regressed else 0.02,
                latency_ms=9000.0 if regressed else 4000.0,
                run_id="candidate",
            )
        )
    path = _write(tmp_path, episodes)
    values: dict[str, JSON] = {"files": [path], "baseline": "run", "baseline_run": "baseline"}
    evicting = {**SMALL_DETECTOR, "max_streams": 1}
    single = _score(workers=1, regression=evicting, **values)
    assert any(r.get("reason") == "evicted" for r in single["regressions"])
    assert _score(workers=1, **values) != single, "eviction must change the results"
    assert _score(workers=2, regression=evicting, **values) == single


def test_workers_need_files_without_suites_or_state(tmp_path: Path) -> None:
    for values in (
        {"store_url": "http://127.0.0.1:1"},
        {"files": ["x.json"], "suites": ["s.yaml"]},
        {"files": ["x.json"], "baseline_state": "state.json"},
    ):
        with pytest.raises(SweepError, match="--workers"):
            ScoreSettings.build({**values, "workers": 2})


def test_big_files_use_every_core_and_small_ones_one(tmp_path: Path) -> None:
    small = tmp_path / "small.json"
    small.write_bytes(orjson.dumps([make_episode("a")]))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 8_000_000 + orjson.dumps([make_episode("a")]))
    cores = len(os.sched_getaffinity(0))
    assert shard_count(ScoreSettings.build({"files": [str(small)]})) == 1
    assert shard_count(ScoreSettings.build({"files": [str(big)]})) == cores
    assert shard_count(ScoreSettings.build({"files": [str(big)], "workers": 1})) == 1
    with_state = {"files": [str(big)], "baseline_state": str(tmp_path / "s.json")}
    assert shard_count(ScoreSettings.build(with_state)) == 1


def test_a_bad_input_file_is_the_same_error_with_shards(tmp_path: Path) -> None:
    suite = Path(__file__).resolve().parents[2] / "examples" / "code-review" / "suite.yaml"
    for path in (str(tmp_path / "missing.json"), str(suite)):
        messages = set()
        for workers in (1, 2):
            with pytest.raises(InputError) as caught:
                _score(files=[path], workers=workers)
            messages.add(str(caught.value))
        assert len(messages) == 1, messages
        assert path in messages.pop()


class _UnpicklableError(Exception):
    def __init__(self, a: int, b: int) -> None:  # pickle rebuilds with one argument: fails
        super().__init__(f"{a}/{b}")


def _fail_in(shard: int, error: BaseException) -> Any:
    def work(index: int) -> int:
        if index == shard:
            raise error
        return index * 10

    return work


def test_run_shards_returns_results_in_shard_order() -> None:
    assert run_shards(3, lambda index: (index, os.getpid()))[0][1] == os.getpid()
    results = run_shards(3, lambda index: (index, os.getpid()))
    assert [i for i, _ in results] == [0, 1, 2]
    assert len({pid for _, pid in results}) == 3


def test_a_failing_child_shard_raises_here() -> None:
    with pytest.raises(ValueError, match="bad shard"):
        run_shards(3, _fail_in(2, ValueError("bad shard")))
    with pytest.raises(ShardError, match="_UnpicklableError: 1/2"):
        run_shards(2, _fail_in(1, _UnpicklableError(1, 2)))
    with pytest.raises(KeyError):
        run_shards(2, _fail_in(0, KeyError("mine")))


def test_a_child_that_dies_without_a_result_is_an_error() -> None:
    def work(index: int) -> int:
        if index == 1:
            os._exit(3)
        return index

    with pytest.raises(ShardError, match=r"ended \(exit 3\) without a result"):
        run_shards(2, work)


def test_a_killed_child_is_named_with_its_signal() -> None:
    def work(index: int) -> int:
        if index == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return index

    with pytest.raises(ShardError, match=r"killed by SIGKILL .*--workers 1"):
        run_shards(2, work)


def test_ctrl_c_stops_every_shard(tmp_path: Path) -> None:
    """SIGINT raises KeyboardInterrupt at once, even under an event loop (whose own handler
    would wait for the loop to run again), and the other shards are stopped unfinished."""
    finished = tmp_path / "child-finished"

    def work(index: int) -> int:
        if index == 0:
            os.kill(os.getpid(), signal.SIGINT)
            return 0
        time.sleep(5)
        finished.write_text("yes")
        return index

    async def under_a_loop() -> None:
        run_shards(2, work)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(under_a_loop())
    time.sleep(0.2)
    assert not finished.exists(), "the child shard ran on after Ctrl-C"
