"""Per-episode alert rules: the episode-store workflow's defaults, strict boundaries,
configuration, passing."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
import yaml

from evalstream.assertions.alerting.alert_rules import (
    AlertConfigError,
    AlertRules,
    EpisodeAlert,
    Severity,
    episode_passes,
    has_critical,
    quality_passes,
)
from evalstream.assertions.evaluation.verdicts import Verdict
from evalstream.assertions.scores.baselines import Baseline, BaselineKey
from evalstream.assertions.scores.dimensions import (
    EpisodeScores,
    SafetyResult,
    ScoringInput,
    score_episode,
)

RULES = AlertRules()


def scores(**fields: Any) -> EpisodeScores:
    values: dict[str, Any] = {
        "episode_id": "e1",
        "correctness": 1.0,
        "cost": 1.0,
        "tool_match": 1.0,
        "latency": 1.0,
        "safety": 1.0,
        "overall": 1.0,
        "cost_delta_pct": 0.0,
        "latency_delta_pct": 0.0,
        "weights": {},
        "baseline": "run:r1 [agent_id=bot,case_id=c1]",
        "safety_detail": SafetyResult(1.0, 0.0, {}, 0, ()),
    }
    values.update(fields)
    return EpisodeScores(**values)


def fired(s: EpisodeScores, rules: AlertRules = RULES) -> dict[str, Severity]:
    return {a.dimension: a.severity for a in rules.evaluate(s)}


def test_a_clean_episode_raises_nothing() -> None:
    assert RULES.evaluate(scores()) == []


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (-50.0, None),  # a cut never alerts
        (20.0, None),  # exactly 20 % is not an alert
        (20.0001, Severity.WARNING),
        (40.0, Severity.WARNING),  # exactly 40 % is a WARNING
        (40.0001, Severity.CRITICAL),
        (math.inf, Severity.CRITICAL),  # unbounded rise
    ],
)
def test_cost_boundaries(delta: float, expected: Severity | None) -> None:
    assert fired(scores(cost_delta_pct=delta)).get("cost") == expected


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (30.0, None),
        (30.0001, Severity.WARNING),
        (60.0, Severity.WARNING),
        (60.0001, Severity.CRITICAL),
        (math.inf, Severity.CRITICAL),
    ],
)
def test_latency_boundaries(delta: float, expected: Severity | None) -> None:
    assert fired(scores(latency_delta_pct=delta)).get("latency") == expected


@pytest.mark.parametrize(
    ("dimension", "at", "below", "severity"),
    [
        ("correctness", 0.5, 0.4999, Severity.CRITICAL),
        ("tool_match", 0.5, 0.4999, Severity.WARNING),
        ("safety", 0.8, 0.7999, Severity.CRITICAL),
        ("overall", 0.5, 0.4999, Severity.CRITICAL),
    ],
)
def test_score_floors_are_strict(
    dimension: str, at: float, below: float, severity: Severity
) -> None:
    assert dimension not in fired(scores(**{dimension: at}))
    assert fired(scores(**{dimension: below})) == {dimension: severity}


def test_one_alert_per_dimension_the_most_severe() -> None:
    alerts = RULES.evaluate(scores(cost_delta_pct=90.0, latency_delta_pct=45.0))
    assert [(a.dimension, a.severity) for a in alerts] == [
        ("cost", Severity.CRITICAL),
        ("latency", Severity.WARNING),
    ]
    [cost] = [a for a in alerts if a.dimension == "cost"]
    assert cost.threshold == 40.0
    assert cost.value == 90.0


def test_unscored_dimensions_raise_nothing() -> None:
    s = scores(
        correctness=None,
        cost=None,
        tool_match=None,
        latency=None,
        overall=None,
        cost_delta_pct=None,
        latency_delta_pct=None,
    )
    assert RULES.evaluate(s) == []


def test_alert_record() -> None:
    [alert] = RULES.evaluate(scores(cost_delta_pct=math.inf))
    assert alert.dedupe_key == "e1/cost"
    assert "unbounded" in alert.message
    record = alert.to_json()
    assert record["value"] is None
    assert record["unbounded"] is True
    assert record["severity"] == "critical"
    assert record["baseline"] == "run:r1 [agent_id=bot,case_id=c1]"
    orjson.dumps(record)
    [floor] = RULES.evaluate(scores(overall=0.2))
    assert floor.dedupe_key == "e1/overall"
    assert floor.to_json()["value"] == 0.2


# --- configuration ------------------------------------------------------------------------


def test_rules_load_from_yaml_merging_defaults() -> None:
    rules = AlertRules.load(
        yaml.safe_load(
            """
            cost: {warning: 10}
            tool_match: {warning: null, critical: 0.2}
            latency: {critical: null}
            """
        )
    )
    assert rules.cost.warning == 10
    assert rules.cost.critical == 40
    assert fired(scores(cost_delta_pct=15.0), rules) == {"cost": Severity.WARNING}
    assert fired(scores(tool_match=0.3), rules) == {}
    assert fired(scores(tool_match=0.1), rules) == {"tool_match": Severity.CRITICAL}
    assert fired(scores(latency_delta_pct=500.0), rules) == {"latency": Severity.WARNING}


def test_an_unbounded_rise_fires_the_most_severe_configured_level() -> None:
    rules = AlertRules.load({"cost": {"critical": None}})
    assert fired(scores(cost_delta_pct=math.inf), rules) == {"cost": Severity.WARNING}


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        ({"cost": {"warning": 50, "critical": 40}}, "cost.*critical.*>= warning"),
        ({"safety": {"warning": 0.5, "critical": 0.9}}, "safety.*critical.*<= warning"),
        ({"cost": {"warnng": 10}}, "cost.warnng"),
        ({"speed": {}}, "speed"),
        ({"cost": {"warning": "lots"}}, "cost.warning"),
        ({"cost": {"warning": float("inf")}}, "finite"),
    ],
)
def test_bad_rules_name_the_setting(obj: dict[str, Any], match: str) -> None:
    with pytest.raises(AlertConfigError, match=match):
        AlertRules.load(obj)


def test_load_of_nothing_is_the_defaults() -> None:
    assert AlertRules.load(None) == AlertRules()
    assert AlertRules.load({}) == AlertRules()


# --- passing ------------------------------------------------------------------------------


def _alert(severity: Severity) -> EpisodeAlert:
    return EpisodeAlert("e1", "cost", severity, 50.0, 40.0)


def test_a_critical_alert_makes_a_passing_episode_fail() -> None:
    assert episode_passes(True, [])
    assert episode_passes(True, [_alert(Severity.WARNING)])
    assert not episode_passes(True, [_alert(Severity.CRITICAL)])
    assert has_critical([_alert(Severity.WARNING), _alert(Severity.CRITICAL)])


def test_failed_assertions_fail_without_alerts_and_none_is_not_a_failure() -> None:
    assert not episode_passes(False, [])
    assert episode_passes(None, [])
    assert not episode_passes(None, [_alert(Severity.CRITICAL)])


@pytest.mark.parametrize("dimension", ["cost", "latency"])
def test_a_critical_rise_fails_the_episode_but_not_its_quality(dimension: str) -> None:
    alert = EpisodeAlert("e1", dimension, Severity.CRITICAL, 70.0, 60.0)
    assert not episode_passes(True, [alert])
    assert quality_passes(True, [alert])
    assert quality_passes(None, [alert])


@pytest.mark.parametrize("dimension", ["correctness", "safety", "overall"])
def test_a_critical_quality_alert_fails_the_quality_outcome(dimension: str) -> None:
    alert = EpisodeAlert("e1", dimension, Severity.CRITICAL, 0.2, 0.5)
    assert not quality_passes(True, [alert])
    assert not quality_passes(
        None, [EpisodeAlert("e1", "cost", Severity.CRITICAL, 70.0, 40.0), alert]
    )
    # A WARNING fails nothing, and failed assertions fail the quality outcome alone.
    assert quality_passes(True, [EpisodeAlert("e1", "tool_match", Severity.WARNING, 0.3, 0.5)])
    assert not quality_passes(False, [])


def test_end_to_end_cost_regression_fails_an_episode_whose_assertions_pass() -> None:
    key = BaselineKey.of({"agent_id": "bot", "case_id": "c1"})
    base = Baseline(key=key, source="run:r1", cost_usd=0.10, latency_ms=1000.0, tool_names=())
    inp = ScoringInput(
        episode_id="e7",
        attrs={"agent_id": "bot", "case_id": "c1"},
        cost_usd=0.15,
        latency_ms=1000.0,
        verdicts=(Verdict.PASS,),
    )
    s = score_episode(inp, base)
    alerts = RULES.evaluate(s)
    assert [(a.dimension, a.severity) for a in alerts] == [("cost", Severity.CRITICAL)]
    assert s.overall is not None
    assert s.overall >= 0.7
    assert not episode_passes(True, alerts)


@pytest.mark.parametrize(
    ("current", "expected"),
    [(0.12, None), (0.14, Severity.WARNING), (0.1400001, Severity.CRITICAL)],
)
def test_boundaries_hold_for_decimal_costs(current: float, expected: Severity | None) -> None:
    # (0.14 - 0.10) / 0.10 * 100 is 40.00000000000001 in binary floating point.
    key = BaselineKey.of({"agent_id": "bot", "case_id": "c1"})
    base = Baseline(key=key, source="run:r1", cost_usd=0.10)
    inp = ScoringInput(episode_id="e", attrs={"agent_id": "bot", "case_id": "c1"}, cost_usd=current)
    assert fired(score_episode(inp, base)).get("cost") == expected
