"""A rolling baseline's summary, kept up to date entry by entry, is `summarise` of its window:
the same medians to the bit, the same modes (ties to the most recent), through evictions,
re-scored episodes, key evictions and restores."""

from __future__ import annotations

from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstream.assertions.scores.baselines import (
    BaselineEntry,
    BaselineKey,
    RollingBaselines,
    summarise,
)
from evalstream.assertions.scores.dimensions import ScoringInput

episodes = st.fixed_dictionaries(
    {
        "id": st.integers(0, 8),  # few ids: re-scored episodes are common
        "key": st.sampled_from(["a", "b", "c"]),
        "cost": st.none() | st.sampled_from([0.0, -0.0, 0.01, 0.02, 1.5]) | st.floats(0, 10),
        "latency": st.sampled_from([0.0, -0.0, 100.0, 250.5]) | st.floats(0, 1e6),
        "steps": st.integers(0, 12),
        "tools": st.sampled_from([(), ("search",), ("search", "refund"), ("lookup",)]),
        "outcome": st.sampled_from(["success", "failure", "timeout"]),
        "restore": st.booleans(),
    }
)


def _input(ep: dict[str, Any]) -> ScoringInput:
    return ScoringInput(
        episode_id=f"e{ep['id']}",
        attrs={"agent_id": ep["key"]},
        outcome=ep["outcome"],
        step_count=ep["steps"],
        cost_usd=0.0 if ep["cost"] is None else ep["cost"],
        cost_complete=ep["cost"] is not None,
        latency_ms=ep["latency"],
        tool_names=ep["tools"],
    )


def _fields(baseline: Any) -> tuple[Any, ...]:
    floats = (baseline.cost_usd, baseline.latency_ms, baseline.step_count)
    return (
        baseline.key,
        baseline.source,
        tuple(None if v is None else float(v).hex() for v in floats),  # -0.0 is not 0.0
        baseline.tool_names,
        baseline.outcome,
        baseline.episodes,
    )


@settings(max_examples=300, deadline=None)
@given(
    window=st.integers(1, 6),
    max_keys=st.integers(1, 3),
    stream=st.lists(episodes, max_size=60),
)
def test_the_rolling_summary_is_summarise_of_the_window(
    window: int, max_keys: int, stream: list[dict[str, Any]]
) -> None:
    store = RollingBaselines(window, max_keys=max_keys, min_episodes=1)
    model: dict[BaselineKey, deque[BaselineEntry]] = {}
    for ep in stream:
        inp = _input(ep)
        key = store.key_for(inp.attrs)
        store.observe(inp)
        if key not in model or all(e.episode_id != inp.episode_id for e in model[key]):
            model.setdefault(key, deque(maxlen=window)).append(BaselineEntry.of(inp))
        if ep["restore"]:  # a compacted-topic record read back
            snapshot = store.snapshot(key)
            assert snapshot is not None
            store.restore(snapshot)
        for known in list(model):
            if store.snapshot(known) is None:  # evicted (least recently used)
                del model[known]
        for known, entries in model.items():
            got = store.get(known)
            assert got is not None
            assert _fields(got) == _fields(summarise(known, store.source, list(entries)))
