"""AlertRules.evaluate (written out for speed) decides like the rules' own `severity`."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstream.assertions.alerting.alert_rules import AlertRules
from evalstream.assertions.scores.dimensions import EpisodeScores
from evalstream.assertions.scores.safety import SafetyResult

thresholds = st.none() | st.sampled_from([0.0, 0.3, 0.5, 0.8, 20.0, 40.0]) | st.floats(0, 100)
deltas = st.none() | st.just(math.inf) | st.sampled_from([20.0, 40.0, 60.0]) | st.floats(-50, 200)
scores = st.none() | st.sampled_from([0.0, 0.3, 0.5, 0.8, 1.0]) | st.floats(0, 1)


@st.composite
def alert_rules(draw: st.DrawFn) -> AlertRules:
    given_rules = {}
    for dim, is_rise in (("cost", True), ("latency", True), ("safety", False), ("overall", False)):
        a, b = draw(thresholds), draw(thresholds)
        if a is not None and b is not None:
            low, high = sorted((a, b))
            a, b = (low, high) if is_rise else (high, low)
        given_rules[dim] = {"warning": a, "critical": b}
    return AlertRules.load(given_rules)


@settings(max_examples=300, deadline=None)
@given(
    rules=alert_rules(),
    cost_delta=deltas,
    latency_delta=deltas,
    correctness=scores,
    overall=scores,
    safety=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
)
def test_evaluate_matches_each_rules_severity(
    *,
    rules: AlertRules,
    cost_delta: float | None,
    latency_delta: float | None,
    correctness: float | None,
    overall: float | None,
    safety: float,
) -> None:
    record = EpisodeScores(
        episode_id="e",
        correctness=correctness,
        cost=None,
        tool_match=None,
        latency=None,
        safety=safety,
        overall=overall,
        cost_delta_pct=cost_delta,
        latency_delta_pct=latency_delta,
        weights={},
        baseline="b",
        safety_detail=SafetyResult(1.0, 0.0, {}, 0, ()),
    )
    expected = {}
    for dim, value in (
        ("cost", cost_delta),
        ("latency", latency_delta),
        ("correctness", correctness),
        ("safety", safety),
        ("overall", overall),
    ):
        decided = None if value is None else getattr(rules, dim).severity(value)
        if decided is not None:
            expected[dim] = decided
    alerts = rules.evaluate(record)
    assert {a.dimension: (a.severity, a.threshold) for a in alerts} == expected
    assert [a.dimension for a in alerts] == list(expected)  # in the rules' order
