"""Records built on the scoring hot path are the same records as the public constructors'."""

from __future__ import annotations

import dataclasses
import math

import pytest

from assertions.alerting.alert_rules import AlertRules, Severity
from assertions.scores.baselines import Baseline, BaselineKey
from assertions.scores.dimensions import (
    DIMENSIONS,
    EpisodeScores,
    ScoringInput,
    delta_percent,
    delta_score,
    score_episode,
    tool_match_score,
)

ATTRS = {"agent_id": "a", "case_id": "c"}
BASE = Baseline(
    key=BaselineKey.of(ATTRS),
    source="run:r",
    cost_usd=0.10,
    latency_ms=1000.0,
    tool_names=("search", "read", "edit"),
    outcome="success",
    step_count=6.0,
)


def rebuilt(scores: EpisodeScores) -> EpisodeScores:
    """The same record through the dataclass's own constructor."""
    return EpisodeScores(
        **{f.name: getattr(scores, f.name) for f in dataclasses.fields(EpisodeScores)}
    )


@pytest.mark.parametrize(
    ("cost", "latency", "tools", "baseline"),
    [
        (0.14, 1000.0, ("search", "read", "edit"), BASE),
        (0.05, 2500.0, ("search", "search", "edit"), BASE),
        (0.10, 0.0, (), BASE),
        (0.10, 1000.0, ("search",), None),
        (0.30, 900.0, ("x",), dataclasses.replace(BASE, cost_usd=0.0, latency_ms=None)),
    ],
)
def test_a_scored_record_is_an_ordinary_frozen_episode_scores(
    cost: float, latency: float, tools: tuple[str, ...], baseline: Baseline | None
) -> None:
    inp = ScoringInput(
        "e1", attrs=ATTRS, cost_usd=cost, latency_ms=latency, tool_names=tools, step_count=5
    )
    scores = score_episode(inp, baseline)
    assert type(scores) is EpisodeScores
    again = rebuilt(scores)
    assert scores == again
    assert hash(scores) == hash(again)
    assert repr(scores) == repr(again)
    assert scores.to_json() == again.to_json()
    with pytest.raises(dataclasses.FrozenInstanceError):
        scores.overall = 0.0  # type: ignore[misc]  # the point: it is frozen


def test_the_inlined_dimensions_follow_the_reference_functions() -> None:
    inp = ScoringInput(
        "e1",
        attrs=ATTRS,
        cost_usd=0.14,
        latency_ms=2100.0,
        tool_names=("search", "edit"),
        step_count=6,
    )
    scores = score_episode(inp, BASE)
    assert scores.cost_delta_pct == delta_percent(0.14, 0.10) == 40.0
    assert scores.cost == delta_score(40.0)
    assert scores.latency_delta_pct == delta_percent(2100.0, 1000.0)
    assert scores.latency == delta_score(110.0) == 0.0
    assert scores.tool_match == tool_match_score(("search", "edit"), BASE.tool_names or ())
    assert scores.weights == dict(zip(DIMENSIONS, (0.4, 0.2, 0.2, 0.1, 0.1), strict=True))
    expected = math.fsum(
        w * v
        for w, v in zip(
            scores.weights.values(),
            (
                scores.correctness or 0.0,
                scores.cost,
                scores.tool_match,
                scores.latency,
                scores.safety,
            ),
            strict=True,
        )
    )
    assert scores.overall == round(expected, 12)


def test_alerts_carry_their_dimensions_severities_and_messages() -> None:
    inp = ScoringInput(
        "e1",
        attrs=ATTRS,
        outcome="failure",
        cost_usd=0.15,
        latency_ms=1400.0,
        tool_names=("edit", "ask"),
        policy_violations={"critical": 1},
        step_count=5,
    )
    alerts = AlertRules().evaluate(score_episode(inp, BASE))
    assert [(a.dimension, a.severity) for a in alerts] == [
        ("cost", Severity.CRITICAL),
        ("latency", Severity.WARNING),
        ("correctness", Severity.CRITICAL),
        ("tool_match", Severity.WARNING),
        ("safety", Severity.CRITICAL),
        ("overall", Severity.CRITICAL),
    ]
    assert alerts[0].message == "cost rose +50.00 % over run:r [agent_id=a,case_id=c] (> 40 %)"
    assert alerts[1].message == "latency rose +40.00 % over run:r [agent_id=a,case_id=c] (> 30 %)"
    assert alerts[3].message == "tool_match score 0.400 < 0.5"
    assert alerts[4].message == "safety score 0.500 < 0.8"
    assert alerts[5].message == "overall score 0.390 < 0.5"


def test_an_unbounded_rise_and_a_disabled_threshold_keep_their_messages() -> None:
    rules = AlertRules.load({"cost": {"critical": None}})
    zero = dataclasses.replace(BASE, cost_usd=0.0)
    alerts = rules.evaluate(score_episode(ScoringInput("e2", attrs=ATTRS, cost_usd=0.2), zero))
    assert alerts[0].message == (
        "cost rose unbounded (baseline 0) over run:r [agent_id=a,case_id=c] (> 20 %)"
    )
    assert alerts[0].severity is Severity.WARNING
