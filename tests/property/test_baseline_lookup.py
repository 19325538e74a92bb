"""`baseline_for(attrs)` (the per-episode lookup) finds what `get(key_for(attrs))` finds."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstream.assertions.scores.baselines import (
    Baseline,
    BaselineKey,
    FileBaselines,
    RollingBaselines,
)
from evalstream.assertions.scores.dimensions import ScoringInput

# Key attr values as they arrive: strings, numbers, null, a list, or absent.
values = st.one_of(
    st.sampled_from(["a", "b", "1"]), st.integers(0, 2), st.none(), st.just([1, "a"])
)
attrs = st.dictionaries(st.sampled_from(["agent_id", "case_id", "other"]), values, max_size=3)


@settings(max_examples=200, deadline=None)
@given(stored=st.lists(attrs, max_size=6), looked_up=attrs)
def test_file_baselines_lookup_matches_get_of_key_for(
    stored: list[dict[str, Any]], looked_up: dict[str, Any]
) -> None:
    keys = {BaselineKey.of(a) for a in stored}
    store = FileBaselines(Baseline(key=k, source="run:r", cost_usd=1.0) for k in keys)
    assert store.baseline_for(looked_up) is store.get(store.key_for(looked_up))


@settings(max_examples=100, deadline=None)
@given(seen=st.lists(attrs, max_size=12), looked_up=attrs)
def test_rolling_baselines_lookup_matches_get_of_key_for(
    seen: list[dict[str, Any]], looked_up: dict[str, Any]
) -> None:
    store = RollingBaselines(5, min_episodes=1)
    for i, a in enumerate(seen):
        store.observe(ScoringInput(f"e{i}", attrs=a, cost_usd=float(i)))
    assert store.baseline_for(looked_up) == store.get(store.key_for(looked_up))
