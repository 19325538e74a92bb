"""Continuous regression detection: CUSUM firing, evidence-based resolution, the guarded
reference, the hold, updates, dedupe, cool-down."""

from __future__ import annotations

import math
import random
from typing import Any

import orjson
import pytest

from evalstream.assertions.alerting.alert_rules import Severity
from evalstream.assertions.alerting.cusum import (
    bernoulli_threshold,
    normal_delay,
    normal_threshold,
    robust_location_scale,
)
from evalstream.assertions.alerting.regression import (
    COST,
    LATENCY_P95,
    PASS_RATE,
    TEST_CUSUM,
    AlertEvent,
    AlertState,
    Observation,
    RegressionConfig,
    RegressionConfigError,
    RegressionDetector,
)
from evalstream.assertions.scores.baselines import Baseline, BaselineKey
from evalstream.assertions.scores.dimensions import ScoringInput, score_episode

MINUTE = 60_000.0
WARM = 250  # reference (150) + guard (100): the first tests run after this many episodes


class Traffic:
    """Observations one minute apart, lognormal cost and latency (sigma 0.3), seeded."""

    def __init__(self, detector: RegressionDetector, seed: int = 1) -> None:
        self.detector = detector
        self.rng = random.Random(seed)
        self.now = 0.0
        self.count = 0
        self.events: list[AlertEvent] = []

    def obs(
        self,
        *,
        cost: float = 0.10,
        latency: float = 1000.0,
        fail: float = 0.05,
        variant: str = "A",
        sigma: float = 0.3,
        warmup: bool = False,
    ) -> Observation:
        self.count += 1
        noise = self.rng.gauss
        return Observation(
            agent_id="bot",
            variant=variant,
            episode_id=f"e{self.count}",
            passed=self.rng.random() >= fail,
            latency_ms=latency * math.exp(noise(0.0, sigma)),
            cost_usd=cost * math.exp(noise(0.0, sigma)),
            warmup=warmup,
        )

    def feed(self, n: int, **kwargs: Any) -> list[AlertEvent]:
        new: list[AlertEvent] = []
        for _ in range(n):
            self.now += MINUTE
            new.extend(self.detector.observe(self.obs(**kwargs), self.now))
        self.events.extend(new)
        return new


def lifecycle(events: list[AlertEvent]) -> list[tuple[str, str]]:
    return [(e.state.value, e.metric) for e in events if e.state is not AlertState.UPDATED]


# --- the CUSUM arithmetic -----------------------------------------------------------------


def test_thresholds_grow_with_the_run_length_and_match_siegmund() -> None:
    h4, h5, h6 = (normal_threshold(0.5, a) for a in (1e4, 1e5, 1e6))
    assert 0 < h4 < h5 < h6
    assert h5 == pytest.approx(9.654, abs=0.01)
    assert normal_delay(0.5, h5, 1.0) < normal_delay(0.5, h5, 0.8)
    assert bernoulli_threshold(0.05, 0.15, 1e4) < bernoulli_threshold(0.05, 0.15, 1e5)


def test_the_reference_estimate_ignores_outliers() -> None:
    rng = random.Random(3)
    clean = [rng.gauss(0.0, 1.0) for _ in range(200)]
    center, scale = robust_location_scale([*clean, 1e6, -1e6], 0.01)
    assert abs(center) < 0.2
    assert 0.8 < scale < 1.2


# --- lifecycle ----------------------------------------------------------------------------


def test_unchanged_traffic_never_fires() -> None:
    t = Traffic(RegressionDetector(), seed=7)
    assert t.feed(5000) == []


def test_nothing_is_tested_before_the_reference_is_full() -> None:
    t = Traffic(RegressionDetector())
    t.feed(WARM - 60)
    assert t.feed(59, cost=1.0) == []  # a shift, but the reference is not full yet


def test_a_sustained_regression_fires_once_holds_and_resolves_on_recovery() -> None:
    t = Traffic(RegressionDetector())
    t.feed(400)
    t.feed(300, cost=0.15)  # +50 % cost, sustained
    held = t.detector.firing()
    t.feed(300)  # recovered
    cost = [e for e in t.events if e.metric == COST]
    assert held == ["bot/A/cost_per_episode_usd"]
    assert lifecycle(cost) == [("firing", COST), ("resolved", COST)]
    firing, resolved = cost[0], cost[-1]
    assert firing.test == TEST_CUSUM
    assert firing.at <= 400 * MINUTE + 40 * MINUTE  # within 40 episodes of the shift
    assert firing.change > 20.0
    assert firing.statistic is not None
    assert firing.limit is not None
    assert firing.statistic >= firing.limit
    assert resolved.reason == "recovered"
    assert 700 * MINUTE < resolved.at <= 700 * MINUTE + 60 * MINUTE
    assert len(cost) <= 6  # one regression, a handful of events
    assert {e.fired_at for e in cost} == {firing.at}
    orjson.dumps([e.to_json() for e in cost])


def test_the_reference_does_not_learn_a_regression() -> None:
    t = Traffic(RegressionDetector())
    t.feed(400)
    t.feed(1500, cost=0.15)  # far longer than reference and guard together
    assert lifecycle(t.events) == [("firing", COST)]
    assert t.detector.holding("bot", "A")
    assert not t.detector.holding("bot", "B")


def test_improvements_never_alert() -> None:
    t = Traffic(RegressionDetector())
    t.feed(400)
    assert t.feed(300, cost=0.05, latency=500.0, fail=0.0) == []


def test_pass_rate_drop_fires_and_latency_rise_fires() -> None:
    t = Traffic(RegressionDetector(), seed=4)
    t.feed(400)
    t.feed(400, fail=0.30)
    assert ("firing", PASS_RATE) in lifecycle(t.events)
    [firing] = [e for e in t.events if e.metric == PASS_RATE and e.state is AlertState.FIRING]
    assert firing.change < -0.05
    assert firing.baseline_value == pytest.approx(0.95, abs=0.05)
    u = Traffic(RegressionDetector(), seed=5)
    u.feed(400)
    u.feed(100, latency=2000.0)
    assert ("firing", LATENCY_P95) in lifecycle(u.events)


def test_the_pass_rate_reference_keeps_growing_after_the_warm_up() -> None:
    t = Traffic(RegressionDetector(), seed=4)
    t.feed(1400)
    t.feed(300, fail=0.30)
    [firing] = [e for e in t.events if e.metric == PASS_RATE and e.state is AlertState.FIRING]
    assert firing.n_baseline == 1000  # pass_rate_reference; cost and latency keep 150
    assert firing.baseline_value == pytest.approx(0.95, abs=0.02)


def test_warmup_observations_do_not_count_for_the_pass_rate() -> None:
    t = Traffic(RegressionDetector())
    t.feed(WARM + 50, fail=0.0, warmup=True)  # passed for want of a baseline
    t.feed(600, fail=0.05)
    assert [e for e in t.events if e.metric == PASS_RATE] == []


def test_updates_only_on_severity_change_or_a_material_move() -> None:
    t = Traffic(RegressionDetector(RegressionConfig(update_interval_ms=0)))
    t.feed(400)
    t.feed(200, cost=0.13)  # +30 %: WARNING
    t.feed(200, cost=0.3)  # +200 %: CRITICAL
    t.feed(400)
    cost = [e for e in t.events if e.metric == COST]
    assert lifecycle(cost) == [("firing", COST), ("resolved", COST)]
    assert cost[0].severity is Severity.WARNING
    assert any(e.severity is Severity.CRITICAL for e in cost)
    assert len(cost) <= 12


def test_an_unbounded_cost_rise_is_critical() -> None:
    t = Traffic(RegressionDetector())
    base = [t.obs(cost=0.0, sigma=0.0) for _ in range(50)]
    t.detector.set_baseline("bot", "A", base, t.now)
    fired = t.feed(30, cost=0.01)
    [event] = [e for e in fired if e.metric == COST]
    assert event.severity is Severity.CRITICAL
    record = event.to_json()
    assert record["change"] is None
    assert record["change_unbounded"] is True
    assert "unbounded" in event.message


# --- dedupe, cool-down, streams -----------------------------------------------------------


def test_cool_down_before_the_same_key_fires_again() -> None:
    config = RegressionConfig(cooldown_ms=200 * MINUTE)
    t = Traffic(RegressionDetector(config))
    t.detector.set_baseline("bot", "A", [t.obs() for _ in range(150)], t.now)
    t.feed(100, cost=0.3)
    t.feed(150)
    [resolved] = [e for e in t.events if e.state is AlertState.RESOLVED]
    again = t.feed(300, cost=0.3)
    [refired] = [e for e in again if e.state is AlertState.FIRING]
    assert refired.at >= resolved.at + config.cooldown_ms


def test_streams_are_separate_per_agent_and_variant() -> None:
    t = Traffic(RegressionDetector())
    for _ in range(400):
        t.feed(1, variant="A")
        t.feed(1, variant="B")
    for _ in range(100):
        t.feed(1, variant="A")
        t.feed(1, variant="B", cost=0.3)
    assert {e.dedupe_key for e in t.events} == {"bot/B/cost_per_episode_usd"}


def test_evicted_streams_resolve_their_alerts() -> None:
    t = Traffic(RegressionDetector(RegressionConfig(max_streams=1)))
    t.detector.set_baseline("bot", "A", [t.obs() for _ in range(150)], t.now)
    t.feed(40, cost=0.3)
    assert t.detector.firing() == ["bot/A/cost_per_episode_usd"]
    [resolved] = t.feed(1, variant="B")
    assert (resolved.state, resolved.reason) == (AlertState.RESOLVED, "evicted")
    assert len(t.detector) == 1


def test_rebaselining_resolves_what_fired_against_the_old_baseline() -> None:
    t = Traffic(RegressionDetector())
    t.detector.set_baseline("bot", "A", [t.obs() for _ in range(150)], t.now)
    t.feed(40, cost=0.3)
    [resolved] = t.detector.set_baseline("bot", "A", [t.obs(cost=0.3) for _ in range(150)], t.now)
    assert resolved.reason == "rebaselined"
    assert t.detector.firing() == []
    assert t.feed(100, cost=0.3) == []


# --- configuration and observations -------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        ({"window": 20}, "no longer exist"),
        ({"reference": 10}, "reference must be >= 30"),
        ({"arl0": 1}, "arl0"),
        ({"metrics": ["cost"]}, "unknown metric"),
        ({"cost_rise_pct": {"warning": 30, "critical": 10}}, "critical"),
        ({"colour": 1}, "colour"),
        ({"cooldown_ms": -1}, "cooldown_ms"),
        ({"pass_rate_reference": 100}, r"pass_rate_reference \(100\) must be >= reference"),
    ],
)
def test_bad_settings_are_named(obj: dict[str, Any], match: str) -> None:
    with pytest.raises(RegressionConfigError, match=match):
        RegressionConfig.load(obj)


def test_settings_load() -> None:
    config = RegressionConfig.load({"reference": 50, "cost_rise_pct": {"warning": 10}})
    assert config.reference == 50
    assert config.cost_rise_pct.critical is None
    assert RegressionConfig.load(None) == RegressionConfig()


def test_observation_from_scores() -> None:
    key = BaselineKey.of({"agent_id": "bot", "case_id": None})
    base = Baseline(key=key, source="s", cost_usd=0.1, latency_ms=100.0, tool_names=())
    inp = ScoringInput(episode_id="e1", attrs={"agent_id": "bot"}, cost_usd=0.2, latency_ms=150.0)
    obs = Observation.from_scores(inp, score_episode(inp, base), passed=True)
    assert (obs.agent_id, obs.variant) == ("bot", "default")
    assert obs.cost_usd == 0.2
    assert obs.latency_ms == 150.0
    assert obs.cost == pytest.approx(0.0)
    assert obs.latency == pytest.approx(0.5)
    assert not obs.warmup
    anonymous = ScoringInput(episode_id="e2", cost_complete=False)
    obs = Observation.from_scores(
        anonymous, score_episode(anonymous, None), passed=False, warmup=True
    )
    assert obs.agent_id == "unknown"
    assert obs.cost_usd is None
    assert obs.values()[0] is None  # a warm-up episode says nothing about the pass rate
