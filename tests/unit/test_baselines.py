"""Baselines: keys, the file store, baseline runs, the rolling store and its serialisation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from evalstream.assertions.scores.baselines import (
    Baseline,
    BaselineEntry,
    BaselineError,
    BaselineKey,
    FileBaselines,
    RollingBaselines,
    summarise,
)
from evalstream.assertions.scores.dimensions import ScoringInput, score_episode

ATTRS = {"agent_id": "bot", "case_id": "c1"}


def episode(n: int = 0, **fields: Any) -> ScoringInput:
    values: dict[str, Any] = {
        "episode_id": f"e{n}",
        "attrs": ATTRS,
        "cost_usd": 0.10,
        "latency_ms": 1000.0,
        "tool_names": ("search", "read"),
        "step_count": 4,
    }
    values.update(fields)
    return ScoringInput(**values)


# --- keys ---------------------------------------------------------------------------------


def test_default_key_is_agent_and_case() -> None:
    key = BaselineKey.of({"agent_id": "bot", "case_id": "c1", "model": "m"})
    assert key.items == (("agent_id", "bot"), ("case_id", "c1"))
    assert str(key) == "agent_id=bot,case_id=c1"
    assert key.to_json() == {"agent_id": "bot", "case_id": "c1"}


def test_missing_attr_is_part_of_the_key_as_null() -> None:
    key = BaselineKey.of({"agent_id": "bot"})
    assert key.items == (("agent_id", "bot"), ("case_id", None))
    assert str(key) == "agent_id=bot,case_id=null"


def test_non_string_attrs_key_by_their_json_text() -> None:
    assert BaselineKey.of({"agent_id": "bot", "case_id": 7}).items[1] == ("case_id", "7")


def test_key_attrs_are_configurable() -> None:
    key = BaselineKey.of({"agent_id": "bot", "model": "m1"}, ("agent_id", "model"))
    assert key.names == ("agent_id", "model")


# --- Baseline -----------------------------------------------------------------------------


def test_baseline_covers_only_its_own_key() -> None:
    b = Baseline(key=BaselineKey.of(ATTRS), source="run:r1")
    assert b.covers({**ATTRS, "other": 1})
    assert not b.covers({"agent_id": "other", "case_id": "c1"})
    assert b.name == "run:r1 [agent_id=bot,case_id=c1]"


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"cost_usd": -1.0}, "cost_usd"),
        ({"latency_ms": float("nan")}, "latency_ms"),
        ({"outcome": "meh"}, "unknown outcome"),
        ({"episodes": 0}, "episodes"),
    ],
)
def test_bad_baselines_are_rejected(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(BaselineError, match=match):
        Baseline(key=BaselineKey.of(ATTRS), source="x", **fields)


def test_baseline_json_round_trip() -> None:
    b = Baseline(
        key=BaselineKey.of(ATTRS),
        source="run:r1",
        cost_usd=0.1,
        latency_ms=900.0,
        tool_names=("a", "b"),
        outcome="success",
        step_count=3.5,
        episodes=4,
    )
    assert Baseline.from_json(orjson.loads(orjson.dumps(b.to_json()))) == b


# --- summaries ----------------------------------------------------------------------------


def test_summary_is_robust_to_an_outlier() -> None:
    key = BaselineKey.of(ATTRS)
    entries = [BaselineEntry.of(episode(i, cost_usd=0.10 + i * 0.001)) for i in range(9)]
    entries.append(BaselineEntry.of(episode(9, cost_usd=50.0, latency_ms=1e7)))
    b = summarise(key, "s", entries)
    assert b.cost_usd == pytest.approx(0.1045)
    assert b.latency_ms == 1000.0
    assert b.episodes == 10


def test_modal_tool_sequence_and_majority_outcome_ties_go_to_the_most_recent() -> None:
    key = BaselineKey.of(ATTRS)
    entries = [
        BaselineEntry.of(episode(0, tool_names=("a",), outcome="failure")),
        BaselineEntry.of(episode(1, tool_names=("b",), outcome="success")),
        BaselineEntry.of(episode(2, tool_names=("a",), outcome="failure")),
        BaselineEntry.of(episode(3, tool_names=("b",), outcome="success")),
    ]
    b = summarise(key, "s", entries)
    assert b.tool_names == ("b",)
    assert b.outcome == "success"
    entries.append(BaselineEntry.of(episode(4, tool_names=("a",), outcome="failure")))
    b = summarise(key, "s", entries)
    assert b.tool_names == ("a",)
    assert b.outcome == "failure"


def test_median_step_count_interpolates() -> None:
    key = BaselineKey.of(ATTRS)
    entries = [BaselineEntry.of(episode(i, step_count=s)) for i, s in enumerate([2, 3, 10, 4])]
    assert summarise(key, "s", entries).step_count == 3.5


def test_incomplete_costs_are_left_out_of_the_median() -> None:
    key = BaselineKey.of(ATTRS)
    entries = [
        BaselineEntry.of(episode(0, cost_usd=0.0, cost_complete=False)),
        BaselineEntry.of(episode(1, cost_usd=0.2)),
    ]
    assert summarise(key, "s", entries).cost_usd == 0.2
    assert summarise(key, "s", entries[:1]).cost_usd is None


# --- FileBaselines ------------------------------------------------------------------------

FILE = {
    "version": 1,
    "source": "run:2024-06-01",
    "baselines": [
        {
            "key": {"agent_id": "bot", "case_id": "c1"},
            "cost_usd": 0.012,
            "latency_ms": 1800,
            "tool_names": ["search", "refund"],
            "outcome": "success",
            "step_count": 7,
            "episodes": 5,
        },
        {"key": {"agent_id": "bot"}, "latency_ms": 500},
    ],
}


def test_file_baselines_load(tmp_path: Path) -> None:
    path = tmp_path / "baselines.json"
    path.write_text(json.dumps(FILE))
    store = FileBaselines.load(path)
    assert len(store) == 2
    b = store.get(store.key_for({"agent_id": "bot", "case_id": "c1", "x": 1}))
    assert b is not None
    assert b.cost_usd == 0.012
    assert b.tool_names == ("search", "refund")
    assert b.name == "run:2024-06-01 [agent_id=bot,case_id=c1]"
    live = store.get(store.key_for({"agent_id": "bot"}))
    assert live is not None
    assert live.cost_usd is None
    assert live.latency_ms == 500.0
    assert store.get(store.key_for({"agent_id": "other", "case_id": "c1"})) is None


def test_file_source_defaults_to_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "prod.json"
    path.write_text(json.dumps({"baselines": [{"key": {"agent_id": "a", "case_id": None}}]}))
    [b] = FileBaselines.load(path).baselines()
    assert b.source == "file:prod.json"


def test_file_baselines_round_trip() -> None:
    store = FileBaselines.from_json(FILE)
    again = FileBaselines.from_json(orjson.loads(orjson.dumps(store.to_json())))
    assert again.baselines() == store.baselines()


def test_file_baselines_do_not_learn() -> None:
    store = FileBaselines.from_json(FILE)
    key = store.key_for(ATTRS)
    before = store.get(key)
    store.observe(episode(cost_usd=99.0))
    assert store.get(key) == before


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps([1]), "must hold a JSON object"),
        (json.dumps({"baselines": {}}), "needs a `baselines` list"),
        (json.dumps({"version": 2, "baselines": []}), "version 2"),
        (json.dumps({"baselines": [], "colour": 1}), "unknown baseline file field.*colour"),
        (json.dumps({"baselines": [{"cost_usd": 1}]}), r"baselines\[0\].*no `key`"),
        (
            json.dumps({"baselines": [{"key": {"agent_id": "a"}, "cost_usd": -2}]}),
            r"baselines\[0\].*cost_usd.*>= 0",
        ),
        (
            json.dumps({"baselines": [{"key": {"model": "m"}}]}),
            "attr\\(s\\) model not in the key attrs",
        ),
        (
            json.dumps({"baselines": [{"key": {"agent_id": "a"}}, {"key": {"agent_id": "a"}}]}),
            "two baselines for key",
        ),
        (json.dumps({"baselines": [], "key_attrs": []}), "key_attrs"),
    ],
)
def test_bad_baseline_files_name_the_file(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(BaselineError, match=match) as info:
        FileBaselines.load(path)
    assert str(path) in str(info.value)


def test_missing_baseline_file(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="cannot read"):
        FileBaselines.load(tmp_path / "nope.json")


def test_from_results_of_a_tagged_baseline_run() -> None:
    run = [episode(i, attrs={**ATTRS, "run_id": "base"}, cost_usd=0.1 * (i + 1)) for i in range(3)]
    other = [episode(9, attrs={**ATTRS, "run_id": "cand"}, cost_usd=5.0)]
    case2 = [episode(5, attrs={"agent_id": "bot", "case_id": "c2", "run_id": "base"})]
    store = FileBaselines.from_results(run + other + case2, source="run:base", run_id="base")
    assert len(store) == 2
    b = store.get(store.key_for(ATTRS))
    assert b is not None
    assert b.cost_usd == pytest.approx(0.2)
    assert b.episodes == 3
    assert b.source == "run:base"


# --- RollingBaselines ---------------------------------------------------------------------


def test_rolling_needs_min_episodes() -> None:
    store = RollingBaselines(window=5, min_episodes=3)
    key = store.key_for(ATTRS)
    store.observe(episode(0))
    store.observe(episode(1))
    assert store.get(key) is None
    store.observe(episode(2))
    b = store.get(key)
    assert b is not None
    assert b.episodes == 3
    assert b.source == "rolling(last 5)"


def test_rolling_keeps_only_the_last_n() -> None:
    store = RollingBaselines(window=3, min_episodes=1)
    for i in range(10):
        store.observe(episode(i, cost_usd=float(i)))
    b = store.get(store.key_for(ATTRS))
    assert b is not None
    assert b.episodes == 3
    assert b.cost_usd == 8.0


def test_rolling_median_resists_outliers() -> None:
    store = RollingBaselines(window=20, min_episodes=1)
    for i in range(19):
        store.observe(episode(i, cost_usd=0.10, latency_ms=1000.0))
    store.observe(episode(19, cost_usd=100.0, latency_ms=1e9))
    b = store.get(store.key_for(ATTRS))
    assert b is not None
    assert b.cost_usd == 0.10
    assert b.latency_ms == 1000.0


def test_rolling_summary_updates_after_observe() -> None:
    store = RollingBaselines(window=3, min_episodes=1)
    key = store.key_for(ATTRS)
    store.observe(episode(0, cost_usd=1.0))
    first = store.get(key)
    store.observe(episode(1, cost_usd=3.0))
    second = store.get(key)
    assert first is not None
    assert second is not None
    assert first.cost_usd == 1.0
    assert second.cost_usd == 2.0


def test_rolling_keys_are_bounded_with_lru_eviction() -> None:
    store = RollingBaselines(window=2, min_episodes=1, max_keys=2)
    a = {"agent_id": "a", "case_id": None}
    b = {"agent_id": "b", "case_id": None}
    c = {"agent_id": "c", "case_id": None}
    store.observe(episode(0, attrs=a))
    store.observe(episode(1, attrs=b))
    assert store.get(store.key_for(a)) is not None  # touch a: b is now least recently used
    store.observe(episode(2, attrs=c))
    assert len(store) == 2
    assert store.evicted == 1
    assert store.get(store.key_for(b)) is None
    assert store.get(store.key_for(a)) is not None
    assert store.get(store.key_for(c)) is not None


def test_an_episode_is_never_part_of_its_own_baseline() -> None:
    store = RollingBaselines(window=5, min_episodes=1)
    store.observe(episode(0, cost_usd=0.10))
    current = episode(1, cost_usd=0.20)
    base = store.get(store.key_for(current.attrs))
    scores = score_episode(current, base)
    store.observe(current)
    assert scores.cost_delta_pct == pytest.approx(100.0)
    assert scores.baseline == "rolling(last 5) [agent_id=bot,case_id=c1]"


def test_an_episode_already_in_the_window_is_not_added_again() -> None:
    store = RollingBaselines(window=5, min_episodes=1)
    key = store.key_for(ATTRS)
    store.observe(episode(0, cost_usd=0.10))
    store.observe(episode(1, cost_usd=0.30))
    store.observe(episode(1, cost_usd=0.30))  # the same episode scored again
    restored = RollingBaselines.from_json(store.to_json())
    restored.observe(episode(0, cost_usd=0.10))
    for each in (store, restored):
        b = each.get(key)
        assert b is not None
        assert b.episodes == 2
        assert b.cost_usd == pytest.approx(0.20)


def test_rolling_snapshot_and_restore() -> None:
    store = RollingBaselines(window=4, min_episodes=1)
    for i in range(6):
        store.observe(episode(i, cost_usd=float(i), tool_names=("x",) * i))
    key = store.key_for(ATTRS)
    snap = store.snapshot(key)
    assert snap is not None
    wire = orjson.loads(orjson.dumps(snap))
    other = RollingBaselines(window=4, min_episodes=1)
    assert other.restore(wire) == key
    assert other.get(key) == store.get(key)
    assert store.snapshot(BaselineKey.of({"agent_id": "zzz"})) is None


def test_restore_replaces_and_trims_to_the_window() -> None:
    big = RollingBaselines(window=10, min_episodes=1)
    for i in range(10):
        big.observe(episode(i, cost_usd=float(i)))
    small = RollingBaselines(window=3, min_episodes=1)
    small.observe(episode(99, cost_usd=1000.0))
    key = small.restore(big.snapshot(big.key_for(ATTRS)))
    b = small.get(key)
    assert b is not None
    assert b.episodes == 3
    assert b.cost_usd == 8.0


def test_rolling_whole_store_round_trip() -> None:
    store = RollingBaselines(window=3, min_episodes=2, max_keys=10)
    for i in range(5):
        store.observe(
            episode(i, attrs={"agent_id": f"a{i % 2}"}, cost_usd=0.0, cost_complete=False)
        )
    again = RollingBaselines.from_json(orjson.loads(orjson.dumps(store.to_json())))
    for agent in ("a0", "a1"):
        key = store.key_for({"agent_id": agent})
        assert again.get(key) == store.get(key)
    assert again.window == 3
    assert again.min_episodes == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"window": 0}, "window must be >= 1"),
        ({"max_keys": 0}, "max_keys"),
        ({"window": 3, "min_episodes": 4}, "min_episodes"),
        ({"key_attrs": ("a", "a")}, "repeat"),
    ],
)
def test_rolling_settings_are_validated(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(BaselineError, match=match):
        RollingBaselines(**kwargs)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"window": "20"}, "`window` must be an integer, got '20'"),
        ({"max_keys": 1.5}, "`max_keys` must be an integer"),
        ({"min_episodes": True}, "`min_episodes` must be an integer"),
        ({"key_attrs": "agent_id"}, "`key_attrs` must be a list of strings"),
        ({"source": 3}, "`source` must be a string or null"),
    ],
)
def test_rolling_settings_of_the_wrong_type_are_named(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(BaselineError, match=match):
        RollingBaselines.from_json({"window": 3, **fields})


@pytest.mark.parametrize(
    "obj",
    [
        {"key": {"agent_id": "a"}, "entries": [{"episode_id": "e"}]},
        {"key": {"agent_id": "a"}, "entries": "nope"},
        {"entries": []},
        {
            "key": {"agent_id": "a"},
            "entries": [{"episode_id": "e", "outcome": "ok", "step_count": 1, "latency_ms": 1}],
        },
    ],
)
def test_bad_snapshots_are_rejected(obj: dict[str, Any]) -> None:
    with pytest.raises(BaselineError):
        RollingBaselines().restore(obj)
