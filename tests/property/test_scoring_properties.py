"""Scoring invariants on generated inputs: the bit-parallel LCS equals the DP, every score is
in [0, 1], cost and latency scores never rise with the current value, F1 is symmetric."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstream.assertions.alerting.alert_rules import AlertRules, Severity
from evalstream.assertions.evaluation.verdicts import Verdict
from evalstream.assertions.scores.baselines import Baseline, BaselineKey
from evalstream.assertions.scores.dimensions import (
    DEFAULT_DETECTORS,
    DIMENSIONS,
    SafetyConfig,
    ScoreWeights,
    ScoringConfig,
    ScoringInput,
    correctness_score,
    delta_percent,
    delta_score,
    lcs_length,
    lcs_length_dp,
    safety_score,
    score_episode,
    tool_match_score,
)

TOOLS = ["search", "read", "edit", "bash", "web"]
tool_seqs = st.lists(st.sampled_from(TOOLS), max_size=40)
small_alphabet = st.lists(st.integers(0, 3), max_size=80)
amounts = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)
ATTRS = {"agent_id": "bot", "case_id": "c"}
KEY = BaselineKey.of(ATTRS)


@given(small_alphabet, small_alphabet)
def test_bit_parallel_lcs_equals_the_dp(a: list[int], b: list[int]) -> None:
    assert lcs_length(a, b) == lcs_length_dp(a, b)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(0, 5), min_size=100, max_size=400),
    st.lists(st.integers(0, 5), min_size=100, max_size=400),
)
def test_bit_parallel_lcs_equals_the_dp_on_long_sequences(a: list[int], b: list[int]) -> None:
    assert lcs_length(a, b) == lcs_length_dp(a, b)


@given(tool_seqs, tool_seqs)
def test_lcs_is_symmetric_and_bounded(a: list[str], b: list[str]) -> None:
    n = lcs_length(a, b)
    assert n == lcs_length(b, a)
    assert 0 <= n <= min(len(a), len(b))


@given(tool_seqs, tool_seqs)
def test_tool_match_is_symmetric_and_in_unit_interval(a: list[str], b: list[str]) -> None:
    score = tool_match_score(a, b)
    assert score == tool_match_score(b, a)
    assert 0.0 <= score <= 1.0
    assert tool_match_score(a, a) == 1.0


@given(tool_seqs, st.sampled_from(TOOLS), st.integers(1, 10))
def test_repeating_a_call_never_raises_tool_match(seq: list[str], tool: str, times: int) -> None:
    stormy = [*seq, *([tool] * times)]
    assert tool_match_score(stormy, seq) <= tool_match_score(seq, seq)
    if seq:
        assert tool_match_score(stormy, seq) < 1.0


@given(amounts, amounts, amounts)
def test_delta_score_is_monotone_non_increasing_in_current(
    base: float, c1: float, c2: float
) -> None:
    lo, hi = sorted((c1, c2))
    s_lo = delta_score(delta_percent(lo, base))
    s_hi = delta_score(delta_percent(hi, base))
    assert 0.0 <= s_hi <= s_lo <= 1.0


@given(amounts.filter(lambda x: x > 0), st.floats(0.0, 1.0))
def test_a_cut_always_scores_1_and_reports_a_negative_delta(base: float, share: float) -> None:
    delta = delta_percent(base * share, base)
    assert delta <= 0.0
    assert delta_score(delta) == 1.0


@given(amounts.filter(lambda x: x > 0))
def test_a_rise_from_zero_is_unbounded(current: float) -> None:
    assert delta_percent(current, 0.0) == math.inf
    assert delta_score(math.inf) == 0.0


@given(
    st.lists(st.sampled_from(list(Verdict)), max_size=10),
    st.sampled_from(["success", "failure", "timeout"]),
    st.sampled_from([None, "success", "failure", "timeout"]),
    st.integers(0, 50),
    st.one_of(st.none(), st.floats(0, 50)),
)
def test_correctness_is_in_unit_interval(
    verdicts: list[Verdict],
    outcome: str,
    baseline_outcome: str | None,
    steps: int,
    baseline_steps: float | None,
) -> None:
    score = correctness_score(
        verdicts,
        outcome=outcome,
        baseline_outcome=baseline_outcome,
        step_count=steps,
        baseline_step_count=baseline_steps,
    )
    assert score is not None
    assert 0.0 <= score <= 1.0
    if not verdicts and baseline_outcome is None:  # the episode's own outcome decides
        assert score == (1.0 if outcome == "success" else 0.0)


@given(
    st.dictionaries(st.sampled_from(["critical", "high", "low", "odd"]), st.integers(0, 5)),
    st.integers(0, 30),
    st.sampled_from(["high", "critical", "low"]),
)
def test_safety_never_rises_with_more_violations(
    violations: dict[str, int], errors: int, extra: str
) -> None:
    before = safety_score(violations, errors, None).score
    more = dict(violations)
    more[extra] = more.get(extra, 0) + 1
    assert 0.0 <= safety_score(more, errors, None).score <= before <= 1.0
    assert safety_score(violations, errors + 1, None).score <= before


episodes = st.fixed_dictionaries(
    {
        "cost_usd": amounts,
        "latency_ms": amounts,
        "tool_names": st.lists(st.sampled_from(TOOLS), max_size=20).map(tuple),
        "outcome": st.sampled_from(["success", "failure", "timeout", "killed"]),
        "step_count": st.integers(0, 100),
        "errors": st.integers(0, 30),
        "policy_violations": st.dictionaries(
            st.sampled_from(["critical", "high", "medium"]), st.integers(0, 3)
        ),
        "verdicts": st.lists(st.sampled_from(list(Verdict)), max_size=6).map(tuple),
        "output": st.one_of(
            st.none(), st.sampled_from(["ok", "mail a@b.io", "AKIAIOSFODNN7EXAMPLE"])
        ),
    }
)
baselines = st.one_of(
    st.none(),
    st.builds(
        lambda cost, latency, tools, outcome, steps: Baseline(
            key=KEY,
            source="run:x",
            cost_usd=cost,
            latency_ms=latency,
            tool_names=tools,
            outcome=outcome,
            step_count=steps,
        ),
        st.one_of(st.none(), amounts),
        st.one_of(st.none(), amounts),
        st.one_of(st.none(), st.lists(st.sampled_from(TOOLS), max_size=20).map(tuple)),
        st.one_of(st.none(), st.sampled_from(["success", "failure"])),
        st.one_of(st.none(), st.floats(0, 100)),
    ),
)
weights = st.builds(
    ScoreWeights,
    st.floats(0, 10),
    st.floats(0, 10),
    st.floats(0, 10),
    st.floats(0, 10),
    st.floats(0.01, 10),
)


@settings(max_examples=300, deadline=None)
@given(episodes, baselines, weights)
def test_every_score_is_in_unit_interval_and_overall_is_a_weighted_mean(
    fields: dict[str, Any], baseline: Baseline | None, w: ScoreWeights
) -> None:
    inp = ScoringInput(episode_id="e", attrs=ATTRS, **fields)
    scores = score_episode(inp, baseline, ScoringConfig(weights=w))
    values = scores.dimensions()
    for name in DIMENSIONS:
        value = values[name]
        assert value is None or 0.0 <= value <= 1.0
    if baseline is None:
        assert values["cost"] is None
        assert values["latency"] is None
        assert values["tool_match"] is None
    assert set(scores.weights) <= {n for n in DIMENSIONS if values[n] is not None}
    if scores.overall is not None:
        assert math.fsum(scores.weights.values()) == pytest.approx(1.0)
        used = [v for n, v in values.items() if v is not None and scores.weights.get(n, 0) > 0]
        assert min(used) - 1e-12 <= scores.overall <= max(used) + 1e-12
    assert scores.to_json()["overall"] == scores.overall


@settings(max_examples=150, deadline=None)
@given(episodes, baselines, st.floats(0.1, 100))
def test_scaling_all_weights_changes_nothing(
    fields: dict[str, Any], baseline: Baseline | None, factor: float
) -> None:
    inp = ScoringInput(episode_id="e", attrs=ATTRS, **fields)
    one = score_episode(inp, baseline).overall
    scaled = ScoreWeights(*(factor * x for x in (0.4, 0.2, 0.2, 0.1, 0.1)))
    other = score_episode(inp, baseline, ScoringConfig(weights=scaled)).overall
    assert (one is None) == (other is None)
    if one is not None and other is not None:
        assert one == pytest.approx(other)


@given(amounts, amounts)
def test_alert_severity_never_falls_as_cost_rises(c1: float, c2: float) -> None:
    rules = AlertRules()
    rank = {None: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}

    def severity(current: float) -> Severity | None:
        base = Baseline(key=KEY, source="s", cost_usd=1.0)
        inp = ScoringInput(episode_id="e", attrs=ATTRS, cost_usd=current)
        fired = [a for a in rules.evaluate(score_episode(inp, base)) if a.dimension == "cost"]
        return fired[0].severity if fired else None

    lo, hi = sorted((c1, c2))
    assert rank[severity(lo)] <= rank[severity(hi)]


FRAGMENTS = [
    "hello ",
    "sk-ant-api03-" + "k" * 30,
    " AKIAIOSFODNN7EXAMPLE ",
    "mail jo@example.org ",
    "4111 1111 1111 1111",
    " 123-45-6789 ",
    "GB82 WEST 1234 5698 7654 32",
    "-----BEGIN PRIVATE KEY-----",
    "xoxb-1234567890-abc",
    " 12345 ",
    "@",
    "-",
    " 2026-01-11 ",
    "4111-1111",
    "1111-1111 ",
    "OK 20",
    "\u0664\u0661\u0661\u0661 \u0661\u0661\u0661\u0661 ",  # Arabic-Indic digits
    "_",
    "AIza",
    "AKIA",
    " ghp_",
    "é",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join))
def test_required_literals_never_hide_a_hit(text: str) -> None:
    # The same detectors without their literal and shape gates must find exactly the same.
    ungated = SafetyConfig(
        detectors=tuple(dataclasses.replace(d, requires=(), shape=()) for d in DEFAULT_DETECTORS)
    )
    assert (
        safety_score({}, 0, text).detector_hits == safety_score({}, 0, text, ungated).detector_hits
    )
