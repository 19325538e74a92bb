"""The episode-store episodes become native signals, and bad episodes fail clearly."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from evalstream.assertions.errors import InputError, SignalDecodeError
from evalstream.assertions.evaluation.assembly import EpisodeAssembler
from evalstream.assertions.scores.dimensions import ScoringInput
from evalstream.assertions.suite_format.suites import SuiteSet
from evalstream.assertions.wire.signals import Signal, signal_from_obj
from evalstream.connectors.codecs.store_episodes import StoreEpisodeError, episode_to_signals

T0 = 1_767_225_600_000.0  # 2026-01-01T00:00:00Z in epoch ms


def episode(**changes: Any) -> dict[str, Any]:
    ep: dict[str, Any] = {
        "episode_id": "ep-1",
        "agent_id": "support-bot",
        "status": "success",
        "started_at": "2026-01-01T00:00:00Z",
        "ended_at": "2026-01-01T00:00:09Z",
        "total_cost_usd": 0.03,
        "metadata": {"case_id": "refund-1", "run_id": "nightly-7", "other": 1},
        "steps": [
            {
                "step_index": 0,
                "step_type": "llm_call",
                "model": "gpt-4o",
                "provider": "openai",
                "input_summary": "user asks",
                "output_summary": "I will search",
                "tokens": 120,
                "cost_usd": 0.01,
                "duration_ms": 1000,
                "timestamp": "2026-01-01T00:00:00Z",
                "air_record_id": "run-a",
            },
            {
                "step_index": 1,
                "step_type": "tool_call",
                "tool_name": "search",
                "input_summary": "q",
                "duration_ms": 5,
                "timestamp": "2026-01-01T00:00:01Z",
            },
            {
                "step_index": 2,
                "step_type": "tool_result",
                "tool_name": "search",
                "output_summary": "3 hits",
                "duration_ms": 0,
                "timestamp": "2026-01-01T00:00:02Z",
            },
            {
                "step_index": 3,
                "step_type": "llm_call",
                "model": "gpt-4o",
                "provider": "openai",
                "output_summary": "Your refund is on its way",
                "tokens": 300,
                "cost_usd": 0.02,
                "duration_ms": 2000,
                "timestamp": "2026-01-01T00:00:03Z",
            },
        ],
    }
    ep.update(changes)
    return ep


def scoring_input(signals: list[Signal]) -> ScoringInput:
    """Run the signals through the same assembly and facts the pipeline uses."""
    assembler = EpisodeAssembler(SuiteSet([]).plan_for)
    for sig in signals:
        assembler.feed(sig, sig.ts)
    assembler.flush()
    [closed] = assembler.drain_ready()
    facts = closed.evaluation.facts
    return ScoringInput.from_result(closed.result(), facts.tool_names())


def names(signals: list[Signal]) -> list[str]:
    return [s.name for s in signals]


def test_an_episode_maps_to_the_documented_signals_in_order() -> None:
    signals = episode_to_signals(episode())
    assert names(signals) == [
        "harness:start",
        "agent:activated",
        "provider:start",
        "provider:end",
        "tool:call",
        "tool:result",
        "provider:start",
        "provider:end",
        "agent:completed",
        "harness:end",
    ]
    assert {s.episode_id for s in signals} == {"ep-1"}
    assert [s.seq for s in signals] == list(range(len(signals)))
    assert all(s.agent == "support-bot" for s in signals)
    start = signals[0]
    assert start.ts == T0
    assert start.attrs == {
        "agent_id": "support-bot",
        "status": "success",
        "source": "episode-store",
        "model": "gpt-4o",
        "provider": "openai",
        "case_id": "refund-1",
        "run_id": "nightly-7",
    }
    call_end = signals[3]
    assert call_end.parent == signals[2].id
    assert call_end.ts == T0 + 1000
    assert call_end.payload == {
        "output": {"content": "I will search", "usage": {"totalTokens": 120}},
        "durationMs": 1000.0,
        "costUsd": 0.01,
        "model": "gpt-4o",
        "airRecordId": "run-a",
    }
    tool_call, tool_result = signals[4], signals[5]
    assert tool_call.payload == {"id": tool_call.id, "name": "search", "input": "q"}
    assert tool_result.parent == tool_call.id
    assert tool_result.payload == {"id": tool_call.id, "name": "search", "result": "3 hits"}
    end = signals[-1]
    assert end.ts == T0 + 9000
    assert end.payload == {"durationMs": 9000.0, "status": "success"}


def test_signals_survive_the_wire_format_and_ids_are_stable() -> None:
    first = episode_to_signals(episode())
    again = episode_to_signals(copy.deepcopy(episode()))
    assert [s.id for s in first] == [s.id for s in again]
    assert len({s.id for s in first}) == len(first)
    decoded = [signal_from_obj(s.to_wire()) for s in first]
    assert [(s.name, s.ts, s.payload) for s in decoded] == [
        (s.name, s.ts, s.payload) for s in first
    ]


def test_scoring_input_has_wall_clock_latency_summed_cost_and_the_tool_sequence() -> None:
    inp = scoring_input(episode_to_signals(episode()))
    assert inp.latency_ms == 9000.0  # ended_at - started_at, not the 3005 ms of step durations
    assert inp.cost_usd == pytest.approx(0.03)
    assert inp.cost_complete
    assert inp.tool_names == ("search",)
    assert inp.outcome == "success"
    assert inp.step_count == 3  # two LLM calls and one tool call
    assert inp.errors == 0
    assert inp.output == "Your refund is on its way"
    assert inp.attrs["case_id"] == "refund-1"


def test_repeated_tool_calls_keep_their_multiplicity() -> None:
    steps = [
        {"step_index": i, "step_type": "tool_call", "tool_name": "search", "duration_ms": 1}
        for i in range(3)
    ]
    inp = scoring_input(episode_to_signals(episode(steps=steps, total_cost_usd=0.0)))
    assert inp.tool_names == ("search", "search", "search")


def test_steps_follow_step_index_not_list_order() -> None:
    ep = episode()
    ep["steps"].reverse()
    assert names(episode_to_signals(ep)) == names(episode_to_signals(episode()))


@pytest.mark.parametrize(
    ("status", "done"),
    [("success", "agent:completed"), ("failure", "agent:stopped"), ("killed", "agent:stopped")],
)
def test_final_status_is_the_outcome(status: str, done: str) -> None:
    signals = episode_to_signals(episode(status=status))
    assert names(signals)[-2:] == [done, "harness:end"]
    assert signals[-1].payload["status"] == status
    assert scoring_input(signals).outcome == status


def test_a_running_episode_has_no_end_signals() -> None:
    signals = episode_to_signals(episode(status="running", ended_at=None))
    assert "harness:end" not in names(signals)
    assert signals[0].attrs is not None
    assert signals[0].attrs["status"] == "running"


def test_failed_llm_call_keeps_its_cost_and_counts_one_error() -> None:
    ep = episode()
    ep["steps"][3]["error"] = "rate limited"
    signals = episode_to_signals(ep)
    assert names(signals)[7:9] == ["provider:end", "provider:error"]
    inp = scoring_input(signals)
    assert inp.cost_usd == pytest.approx(0.03)
    assert inp.errors == 1


def test_error_steps_and_failed_tools_are_error_signals() -> None:
    ep = episode(total_cost_usd=None)
    ep["steps"][1]["error"] = "timeout"
    ep["steps"].append({"step_index": 4, "step_type": "error", "error": "crashed"})
    ep["steps"].append(
        {"step_index": 5, "step_type": "decision", "output_summary": "give up", "error": "x"}
    )
    signals = episode_to_signals(ep)
    assert names(signals).count("tool:error") == 1
    assert names(signals).count("agent:error") == 2
    crashed = next(s for s in signals if s.id == "ep-1:4:error")
    assert crashed.payload == {"agent": "support-bot", "error": "crashed"}
    assert scoring_input(signals).errors == 3


def test_times_fall_back_to_steps_when_the_episode_has_none() -> None:
    signals = episode_to_signals(episode(started_at=None, ended_at=None))
    # Starts at the first step; ends where the last step ends (00:00:03 + 2000 ms).
    assert signals[0].ts == T0
    assert signals[-1].payload["durationMs"] == 5000.0


def test_a_step_without_timestamp_starts_where_the_previous_one_ended() -> None:
    ep = episode()
    del ep["steps"][1]["timestamp"]
    tool_call = episode_to_signals(ep)[4]
    assert tool_call.ts == T0 + 1000


def test_final_output_comes_from_metadata_when_present() -> None:
    ep = episode(metadata={"final_output": "done: ticket 42"})
    inp = scoring_input(episode_to_signals(ep))
    assert inp.output == "done: ticket 42"


def test_unknown_step_type_can_be_kept_as_an_inert_signal() -> None:
    ep = episode()
    ep["steps"].append({"step_index": 9, "step_type": "handoff", "output_summary": "to human"})
    signals = episode_to_signals(ep, unknown_steps="keep")
    kept = next(s for s in signals if s.name == "step:handoff")
    assert kept.payload["output_summary"] == "to human"
    assert scoring_input(signals).step_count == 3


# --- bad input ------------------------------------------------------------------------------


def bad(ep: Any, match: str, reason: str) -> StoreEpisodeError:
    with pytest.raises(StoreEpisodeError, match=match) as info:
        episode_to_signals(ep, where="store.jsonl:3")
    assert info.value.reason == reason
    assert isinstance(info.value, SignalDecodeError)
    assert isinstance(info.value, InputError)
    assert str(info.value).startswith("store.jsonl:3")
    return info.value


def with_step(index: int, **changes: Any) -> dict[str, Any]:
    ep = episode()
    ep["steps"][index].update(changes)
    return ep


def without(key: str, step: int | None = None) -> dict[str, Any]:
    ep = episode()
    if step is None:
        del ep[key]
    else:
        del ep["steps"][step][key]
    return ep


def test_not_an_object() -> None:
    bad(["ep"], "must be a JSON object", "not_an_object")


@pytest.mark.parametrize("key", ["episode_id", "agent_id", "status", "steps"])
def test_missing_episode_fields(key: str) -> None:
    bad(without(key), f"has no `{key}`", "missing_field")


def test_empty_agent_id() -> None:
    bad(episode(agent_id=""), "`agent_id` must be a non-empty string", "bad_field")


def test_unknown_status_names_the_valid_ones() -> None:
    bad(episode(status="done"), "unknown `status` 'done'; valid: running, success", "bad_field")


def test_missing_step_type() -> None:
    bad(without("step_type", 1), "step 1: has no `step_type`", "missing_field")


def test_unknown_step_type_is_an_error_by_default() -> None:
    error = bad(
        with_step(2, step_type="handoff"), "unknown `step_type` 'handoff'", "unknown_step_type"
    )
    assert "llm_call, tool_call, tool_result, decision, error" in str(error)


def test_tool_call_without_tool_name() -> None:
    bad(without("tool_name", 1), "step 1: has no `tool_name`", "missing_field")


def test_llm_call_without_cost_is_not_a_silent_zero() -> None:
    bad(without("cost_usd", 0), "step 0: LLM call has no `cost_usd`", "bad_cost")


@pytest.mark.parametrize("cost", [-0.01, "0.01", float("nan"), float("inf"), True, [1]])
def test_bad_costs(cost: Any) -> None:
    bad(with_step(0, cost_usd=cost), "`cost_usd` must be a (finite )?number >= 0", "bad_cost")


def test_cost_on_a_tool_step_is_not_dropped() -> None:
    bad(with_step(1, cost_usd=0.5), "tool_call step has `cost_usd` 0.5", "bad_cost")


def test_zero_cost_on_a_tool_step_is_fine() -> None:
    assert episode_to_signals(with_step(1, cost_usd=0))


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("tokens", -1, "`tokens` must be a finite number >= 0"),
        ("tokens", 1.5, "`tokens` must be a whole number"),
        ("tokens", "many", "`tokens` must be a number >= 0"),
        ("duration_ms", -5, "`duration_ms` must be a finite number >= 0"),
        ("step_index", -1, "`step_index` must be an integer >= 0"),
        ("step_index", "1", "`step_index` must be an integer >= 0"),
    ],
)
def test_bad_step_numbers(field: str, value: Any, match: str) -> None:
    bad(with_step(0, **{field: value}), match, "bad_field")


def test_duplicate_step_index() -> None:
    bad(with_step(1, step_index=0), "two steps have `step_index` 0", "bad_field")


def test_bad_timestamp() -> None:
    bad(with_step(2, timestamp="yesterday"), "`timestamp` 'yesterday'", "bad_timestamp")


def test_end_before_start() -> None:
    bad(episode(ended_at="2025-12-31T23:59:59Z"), "before `started_at`", "bad_timestamp")


def test_no_time_at_all() -> None:
    ep = episode(started_at=None, ended_at=None)
    for step in ep["steps"]:
        del step["timestamp"]
    bad(ep, "no `started_at` and no step has a `timestamp`", "missing_field")


def test_total_cost_that_disagrees_with_the_steps() -> None:
    bad(episode(total_cost_usd=0.5), "`total_cost_usd` 0.5 is not the sum", "cost_mismatch")


def test_negative_total_cost() -> None:
    bad(episode(total_cost_usd=-1), "`total_cost_usd` must be a finite number >= 0", "bad_cost")


def test_step_that_is_not_an_object() -> None:
    bad(episode(steps=["llm_call"]), r"steps\[0\]: a step must be an object", "not_an_object")


def test_metadata_that_is_not_an_object() -> None:
    bad(episode(metadata=[1]), "`metadata` must be an object", "bad_field")
