"""The direct decoder (`store_results.episode_result`) equals the signal path on every episode.

Scoring without suites computes an episode-store episode's result straight from the episode;
the reference is the path it replaces: `episode_to_signals`, assembly and the engine, then
`Scorer.score`. Generated episodes cover every step type, errors of every kind, missing and
extra fields, unknown steps kept, metadata outputs, running episodes, odd timestamps, and
invalid episodes (generated, and one mutation per validation rule): both paths must give the
same scored-episode JSON, result and run record, or the same rejection (reason and message).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstream.assertions.alerting.regression import RegressionConfig, RegressionDetector
from evalstream.assertions.scores.baselines import RollingBaselines
from evalstream.assertions.scores.run import Scorer
from evalstream.connectors.codecs.store_episodes import (
    STATUSES,
    STEP_TYPES,
    StoreEpisodeError,
    UnknownSteps,
    episode_to_signals,
)
from evalstream.connectors.codecs.store_results import episode_result
from evalstream.stream.score_sweep import ScoreSettings, score_episodes
from tests.scoring.episodes import T0 as T0_DATETIME
from tests.scoring.episodes import make_episode

JSON = Any
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in epoch ms
WHERE = "store.jsonl:1: episode"
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _iso(offset_ms: int) -> str:
    seconds, ms = divmod(T0 + offset_ms, 1000)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{ms:03d}Z"


# --- generated episodes -----------------------------------------------------------------------

offsets = st.integers(0, 10_000)  # steps overlap, start before and after the episode
valid_timestamps = st.one_of(
    offsets.map(_iso),
    offsets.map(_iso),
    offsets.map(lambda ms: T0 + ms),  # epoch milliseconds
    offsets.map(lambda ms: float(T0 + ms) + 0.25),
    st.just(1e17),  # a valid number whose date cannot be rendered
)
texts = st.one_of(
    st.none(),
    st.sampled_from(["", "ok", "Your refund is on its way."]),
    st.just([{"type": "text", "text": "a"}, "b", {"type": "image"}]),
    st.just({"text": "dict text"}),
    st.just({"no": "text"}),
    st.integers(-3, 3),
)
errors = st.one_of(st.none(), st.sampled_from(["", "boom", 0, 1, {}, {"code": 500}, [], ["x"]]))
valid_amounts = st.one_of(st.none(), st.sampled_from([0, 0.0, 1, 0.5, 0.0123, 250, 3.0]))
valid_costs = st.sampled_from([0, 0.0, 0.01, 0.25, 1, 1e-12])
# Unknown types are valid only with unknown_steps="keep".
known_types = st.sampled_from([*STEP_TYPES, *STEP_TYPES, *STEP_TYPES, "handoff", "retry:error"])
tool_names = st.sampled_from(["search", "refund", "notify"])
# What the store should never send, mixed into the episodes drawn `broken`.
INVALID: dict[str, st.SearchStrategy[JSON]] = {
    "timestamp": st.sampled_from(["yesterday", True, [1]]),
    "amount": st.sampled_from([-1, 1.5e308 * 10, "3", True]),
    "tokens": st.sampled_from([2.5, -4]),
    "step_type": st.sampled_from(["", 7, None]),  # None: no step_type at all
    "name": st.sampled_from(["", 5, None]),
    "model": st.sampled_from([3, ["m"]]),
}


@st.composite
def steps(draw: st.DrawFn, broken: bool) -> dict[str, JSON]:
    def pick(valid: st.SearchStrategy[JSON], invalid: str) -> JSON:
        if broken and draw(st.integers(0, 4)) == 0:
            return draw(INVALID[invalid])
        return draw(valid)

    step_type = pick(known_types, "step_type")
    step: dict[str, JSON] = {}
    if step_type is not None:
        step["step_type"] = step_type
    fields: dict[str, tuple[st.SearchStrategy[JSON], str]] = {
        "model": (st.one_of(st.none(), st.sampled_from(["gpt-4o", "claude-x", ""])), "model"),
        "provider": (st.sampled_from(["openai", "anthropic", ""]), "model"),
        "input_summary": (texts, "model"),
        "output_summary": (texts, "model"),
        "tokens": (st.one_of(valid_amounts, st.sampled_from([120, 2.0])), "tokens"),
        "duration_ms": (st.one_of(valid_amounts, st.integers(1, 5_000)), "amount"),
        "timestamp": (valid_timestamps, "timestamp"),
        "error": (errors, "model"),
        "air_record_id": (st.sampled_from(["run-a", None]), "model"),
        "extra_field": (st.sampled_from([1, "x"]), "model"),
    }
    for key, (valid, invalid) in fields.items():
        if draw(st.booleans()):
            step[key] = pick(valid, invalid)
    if step_type in ("tool_call", "tool_result") and draw(st.integers(0, 5)):
        step["tool_name"] = pick(tool_names, "name")
    if step_type == "llm_call" and (not broken or draw(st.integers(0, 3))):
        step["cost_usd"] = pick(valid_costs, "amount")
    elif draw(st.integers(0, 5)) == 0:
        step["cost_usd"] = pick(st.sampled_from([0, 0.0, None]), "amount")
    return step


metadata_values = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "case_id": st.sampled_from(["refund", 3, None]),
            "run_id": st.sampled_from(["nightly", "baseline"]),
            "variant": st.sampled_from(["a", "b"]),
            "baseline_key": st.just("k"),
            "tenant": st.just("acme"),
            "tags": st.just(["x", "y"]),
            "final_output": st.one_of(st.none(), texts, st.just({"answer": [1, 2]})),
            "output": st.one_of(texts, st.just(2**70)),  # 2**70: orjson cannot write it
            "other": st.just(1),
        },
    ),
)


@st.composite
def episodes(draw: st.DrawFn) -> dict[str, JSON]:
    broken = draw(st.integers(0, 3)) == 0
    raw_steps = draw(st.lists(steps(broken), max_size=8))
    index_mode = draw(st.sampled_from(["all", "all", "none", "mixed", "shuffled"]))
    if index_mode in ("all", "shuffled"):
        for index, step in enumerate(raw_steps):
            step["step_index"] = index
        if index_mode == "shuffled":
            raw_steps = draw(st.permutations(raw_steps))
    elif index_mode == "mixed":
        for step in raw_steps:
            if draw(st.booleans()):
                step["step_index"] = draw(st.integers(0, 4))
    episode: dict[str, JSON] = {
        "episode_id": draw(st.sampled_from(["ep-1", "ep-2", "ep-3"])),
        "agent_id": draw(st.sampled_from(["support-bot", "support-bot", "other-bot"])),
        "status": draw(st.sampled_from([*STATUSES, "success", "success"])),
        "steps": raw_steps,
    }
    optional: dict[str, st.SearchStrategy[JSON]] = {
        "started_at": offsets.map(_iso),
        "ended_at": offsets.map(lambda ms: _iso(ms + 15_000)),
        "metadata": metadata_values,
        "tools_used": st.just(["search"]),
    }
    if broken:
        optional["started_at"] = st.one_of(valid_timestamps, INVALID["timestamp"])
        optional["ended_at"] = st.one_of(valid_timestamps, INVALID["timestamp"])
        optional["metadata"] = st.one_of(metadata_values, st.sampled_from(["text", [1]]))
    for key, strategy in optional.items():
        if draw(st.integers(0, 3)):
            episode[key] = draw(strategy)
    if draw(st.booleans()):
        stated = sum(
            s["cost_usd"]
            for s in raw_steps
            if s.get("step_type") == "llm_call" and isinstance(s.get("cost_usd"), int | float)
        )
        episode["total_cost_usd"] = stated + (draw(st.sampled_from([0.0, 0.5])) if broken else 0)
    return episode


# --- the two paths ----------------------------------------------------------------------------


def _scorer() -> Scorer:
    return Scorer(
        baselines=RollingBaselines(3, min_episodes=1),
        detector=RegressionDetector(RegressionConfig.load({})),
    )


def _may_decline(obj: JSON) -> bool:
    """Whether two steps get the same index (a step without `step_index` takes its position),
    or the metadata output is beyond what JSON writers take (an integer beyond 64 bits)."""
    raw = obj["steps"]
    indices = [pos if s.get("step_index") is None else s["step_index"] for pos, s in enumerate(raw)]
    metadata = obj.get("metadata") or {}
    outputs = [metadata.get(key) for key in ("final_output", "output")]
    return len(set(indices)) != len(indices) or 2**70 in outputs or {"n": 2**70} in outputs


def _signal_path(obj: JSON, scorer: Scorer, unknown: UnknownSteps) -> dict[str, JSON]:
    try:
        signals = episode_to_signals(obj, where=WHERE, unknown_steps=unknown)
    except StoreEpisodeError as exc:
        return {"rejected": [exc.reason, str(exc)]}
    closed = scorer.evaluate(signals)
    result = closed.result()
    return {
        "result": result.to_json() if result.reported() is result else None,
        "reported": closed.report().to_json(),
        "tool_names": closed.evaluation.facts.tool_names(),
        "start": signals[0].ts,
        "attrs": signals[0].attrs,
        "running": obj.get("status") == "running",
        "scored": scorer.score(closed).to_json(),
    }


def _direct_path(obj: JSON, scorer: Scorer, unknown: UnknownSteps) -> dict[str, JSON]:
    try:
        found = episode_result(obj, where=WHERE, unknown_steps=unknown)
    except StoreEpisodeError as exc:
        return {"rejected": [exc.reason, str(exc)]}
    if found is None:  # declined: the sweep takes the signal path
        return {"declined": True, **_signal_path(obj, scorer, unknown)}
    result = found.result
    return {
        "result": result.to_json() if result.reported() is result else None,
        "reported": result.reported().to_json(),
        "tool_names": found.tool_names,
        "start": found.start,
        "attrs": result.attrs,
        "running": found.running,
        "scored": scorer.score_result(result, found.tool_names).to_json(),
    }


def _same(a: JSON, b: JSON) -> bool:
    """Equal as the results file writes them (floats to the last bit, NaN included)."""
    return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        b, option=orjson.OPT_SORT_KEYS
    )


def _compare(batch: list[dict[str, JSON]], unknown: UnknownSteps) -> list[str]:
    """Both paths over the batch, in order, each with its own scorer; the outcomes that differ."""
    via_signals, direct = _scorer(), _scorer()
    differences = []
    for obj in batch:
        expected = _signal_path(copy.deepcopy(obj), via_signals, unknown)
        got = _direct_path(copy.deepcopy(obj), direct, unknown)
        if got.pop("declined", False):
            assert _may_decline(obj), "the direct path declined an ordinary episode"
        if not _same(expected, got):
            differences.append(f"{obj!r}:\n  signals {expected!r}\n  direct  {got!r}")
    runs = [
        scorer.run(created_at="now", source={}, baseline={}) for scorer in (via_signals, direct)
    ]
    if not _same(runs[0].to_json(), runs[1].to_json()):
        differences.append("the run records differ")
    return differences


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(episodes(), min_size=1, max_size=4), st.sampled_from(["error", "keep"]))
def test_the_direct_result_equals_the_signal_path(
    batch: list[dict[str, JSON]], unknown: UnknownSteps
) -> None:
    assert _compare(batch, unknown) == []


# --- every validation rule, one mutation each -------------------------------------------------


def _valid() -> dict[str, JSON]:
    return {
        "episode_id": "ep-1",
        "agent_id": "support-bot",
        "status": "success",
        "started_at": _iso(0),
        "ended_at": _iso(9_000),
        "total_cost_usd": 0.03,
        "metadata": {"case_id": "refund", "final_output": {"answer": "refunded"}},
        "steps": [
            {
                "step_index": 0,
                "step_type": "llm_call",
                "model": "gpt-4o",
                "provider": "openai",
                "output_summary": "I will search",
                "tokens": 120,
                "cost_usd": 0.01,
                "duration_ms": 1000,
                "timestamp": _iso(0),
            },
            {
                "step_index": 1,
                "step_type": "tool_call",
                "tool_name": "search",
                "timestamp": _iso(1),
            },
            {"step_index": 2, "step_type": "tool_result", "tool_name": "search", "error": "503"},
            {"step_index": 3, "step_type": "decision", "output_summary": "refund"},
            {"step_index": 4, "step_type": "error", "output_summary": "retrying"},
            {"step_index": 5, "step_type": "llm_call", "cost_usd": 0.02, "duration_ms": 5},
        ],
    }


def _set(path: tuple[JSON, ...], value: JSON) -> Callable[[dict[str, JSON]], JSON]:
    def mutate(episode: dict[str, JSON]) -> JSON:
        target: JSON = episode
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return episode

    return mutate


def _drop(path: tuple[JSON, ...]) -> Callable[[dict[str, JSON]], JSON]:
    def mutate(episode: dict[str, JSON]) -> JSON:
        target: JSON = episode
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
        return episode

    return mutate


def _no_time(episode: dict[str, JSON]) -> JSON:
    del episode["started_at"]
    for step in episode["steps"]:
        step.pop("timestamp", None)
    return episode


MUTATIONS: dict[str, tuple[str, Callable[[dict[str, JSON]], JSON]]] = {
    "not an object": ("not_an_object", lambda episode: [episode]),
    "no episode_id": ("missing_field", _drop(("episode_id",))),
    "empty agent_id": ("bad_field", _set(("agent_id",), "")),
    "agent_id not text": ("bad_field", _set(("agent_id",), 7)),
    "no status": ("missing_field", _drop(("status",))),
    "unknown status": ("bad_field", _set(("status",), "done")),
    "no steps": ("missing_field", _drop(("steps",))),
    "steps not a list": ("bad_field", _set(("steps",), {"0": {}})),
    "metadata not an object": ("bad_field", _set(("metadata",), ["x"])),
    "step not an object": ("not_an_object", _set(("steps", 1), "tool_call")),
    "step_index not an integer": ("bad_field", _set(("steps", 1, "step_index"), "1")),
    "negative step_index": ("bad_field", _set(("steps", 1, "step_index"), -1)),
    "two steps share a step_index": ("bad_field", _set(("steps", 1, "step_index"), 0)),
    "no step_type": ("missing_field", _drop(("steps", 3, "step_type"))),
    "unknown step_type": ("unknown_step_type", _set(("steps", 3, "step_type"), "handoff")),
    "LLM call without cost": ("bad_cost", _drop(("steps", 0, "cost_usd"))),
    "negative cost": ("bad_cost", _set(("steps", 0, "cost_usd"), -0.5)),
    "cost not a number": ("bad_cost", _set(("steps", 0, "cost_usd"), "0.01")),
    "cost on a tool step": ("bad_cost", _set(("steps", 1, "cost_usd"), 0.01)),
    "fractional tokens": ("bad_field", _set(("steps", 0, "tokens"), 1.5)),
    "negative tokens": ("bad_field", _set(("steps", 0, "tokens"), -3)),
    "negative duration": ("bad_field", _set(("steps", 0, "duration_ms"), -1)),
    "model not text": ("bad_field", _set(("steps", 0, "model"), 4)),
    "provider not text": ("bad_field", _set(("steps", 0, "provider"), ["openai"])),
    "tool call without tool_name": ("missing_field", _drop(("steps", 1, "tool_name"))),
    "tool_name not text": ("bad_field", _set(("steps", 2, "tool_name"), 1)),
    "bad step timestamp": ("bad_timestamp", _set(("steps", 1, "timestamp"), "noon")),
    "bad started_at": ("bad_timestamp", _set(("started_at",), True)),
    "bad ended_at": ("bad_timestamp", _set(("ended_at",), "later")),
    "ended before started": ("bad_timestamp", _set(("ended_at",), _iso(-5))),
    "no time at all": ("missing_field", _no_time),
    "total cost not the sum": ("cost_mismatch", _set(("total_cost_usd",), 0.5)),
    "total cost negative": ("bad_cost", _set(("total_cost_usd",), -0.03)),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_rule_rejects_the_same_way_on_both_paths(mutation: str) -> None:
    reason, mutate = MUTATIONS[mutation]
    bad = mutate(_valid())
    expected = _signal_path(copy.deepcopy(bad), _scorer(), "error")
    assert expected["rejected"][0] == reason
    assert _direct_path(copy.deepcopy(bad), _scorer(), "error") == expected


def test_the_valid_episode_scores_the_same_on_both_paths() -> None:
    valid = _valid()
    assert _compare([valid, {**valid, "episode_id": "ep-2"}], "error") == []
    found = episode_result(valid)
    assert found is not None
    metrics = found.result.metrics
    assert (metrics.llm_calls, metrics.tool_calls, metrics.errors) == (2, 1, 2)
    assert found.result.output == '{"answer":"refunded"}'


def test_episodes_it_cannot_reproduce_take_the_signal_path() -> None:
    collide = _valid()
    del collide["steps"][1]["step_index"]  # position 1, and also the step_index of no other
    collide["steps"][2]["step_index"] = 1  # now two steps have index 1
    unserialisable = _valid()
    unserialisable["metadata"]["final_output"] = {"n": 2**70}
    for episode in (collide, unserialisable):
        assert episode_result(episode) is None
        assert _compare([episode], "error") == []


# --- the whole sweep --------------------------------------------------------------------------


def _sweep_episodes() -> list[JSON]:
    """A store export: a baseline run, candidates (regressed, failed, with errors), episodes the
    direct path declines, a running episode and a bad one."""
    batch: list[JSON] = []
    for i in range(12):
        start = T0_DATETIME + timedelta(minutes=i)
        run_id = "baseline" if i < 2 else "candidate"
        episode = make_episode(f"e{i:02d}", start=start, run_id=run_id, cost=0.02 + 0.01 * (i % 3))
        batch.append(episode)
    batch[5]["status"] = "failure"
    batch[6]["steps"][1]["error"] = "timeout"
    batch[7]["steps"][0]["cost_usd"] = 0.4  # a cost regression
    batch[8]["steps"][2].pop("step_index")  # still unique: position 2
    batch[9]["steps"][3].pop("step_index")  # position 3, and a step_index 3 elsewhere: declined
    deep: JSON = "end"
    for _ in range(300):  # readable, but too deep for orjson to write: declined
        deep = [deep]
    batch[10]["metadata"]["final_output"] = deep
    batch.append(make_episode("still-open", start=T0_DATETIME, status="running"))
    bad = make_episode("bad", start=T0_DATETIME)
    bad["steps"][1]["cost_usd"] = 0.5
    batch.append(bad)
    return batch


@pytest.mark.parametrize(
    "baseline",
    [
        {"baseline": "run", "baseline_run": "baseline"},
        {"baseline": "rolling", "rolling_min_episodes": 1, "baseline_state": "state.json"},
        {"baseline": "none"},
    ],
    ids=["run", "rolling", "none"],
)
def test_a_sweep_without_suites_equals_one_through_the_engine(
    baseline: dict[str, JSON], tmp_path: Path
) -> None:
    """Without a suite the sweep takes the direct path; a suite that matches no episode makes
    it evaluate signals, and changes nothing else a score run records."""
    export = tmp_path / "export.ndjson"
    export.write_text("\n".join(json.dumps(e) for e in _sweep_episodes()))
    nobody = tmp_path / "nobody.yaml"
    nobody.write_text(
        "name: nobody\nmatch: {agent_id: nobody}\n"
        "defaultAssertions:\n  - type: tool.called\n    name: refund\n"
    )
    runs: list[dict[str, JSON]] = []
    for suites in ([], [str(nobody)]):
        values = {"files": [str(export)], "suites": suites, **baseline}
        if "baseline_state" in values:
            values["baseline_state"] = str(tmp_path / f"state-{len(suites)}.json")
        scored = asyncio.run(score_episodes(ScoreSettings.build(values), now=NOW))
        runs.append(scored.to_json())
    assert len(runs[0]["episodes"]) == (10 if baseline["baseline"] == "run" else 12)
    assert [r["reason"] for r in runs[0]["rejected"]] == ["bad_cost"]
    assert runs[0]["skipped"] == [{"episode_id": "still-open", "reason": "still running"}]
    for record in runs:
        record["baseline"].pop("state", None)  # the state files' paths differ
    assert _same(runs[0], runs[1])
    if "baseline_state" in baseline:
        states = [(tmp_path / f"state-{n}.json").read_bytes() for n in (0, 1)]
        assert states[0] == states[1]
