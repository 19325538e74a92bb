"""The alerts of scored episodes: their dimensions, severities and messages."""

from __future__ import annotations

import dataclasses

from evalstream.assertions.alerting.alert_rules import AlertRules, Severity
from evalstream.assertions.scores.baselines import Baseline, BaselineKey
from evalstream.assertions.scores.dimensions import (
    ScoringInput,
    score_episode,
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
