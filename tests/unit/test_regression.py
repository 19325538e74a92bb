"""Windowed regression detection: thresholds AND significance, lifecycle, dedupe, cool-down."""

from __future__ import annotations

import itertools
import random
from typing import Any

import orjson
import pytest

from assertions.alert_rules import Severity
from assertions.baselines import Baseline, BaselineKey
from assertions.regression import (
    COST,
    LATENCY_P95,
    PASS_RATE,
    TEST_BOOTSTRAP,
    TEST_NEWCOMBE,
    TEST_WELCH,
    AlertEvent,
    AlertState,
    Observation,
    RegressionConfig,
    RegressionConfigError,
    RegressionDetector,
)
from assertions.scoring import ScoringInput, score_episode
from assertions.statistics import (
    exact_bootstrap_quantile_rise_p,
    mean,
    percentile,
    welch_t_test,
)

MINUTE = 60_000.0


class Traffic:
    """Feeds observations one minute apart, with seeded ±10 % noise, and keeps the events."""

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
        passed: bool | None = None,
        pass_rate: float = 1.0,
        overall: float = 0.9,
        variant: str = "A",
        noise: float = 0.1,
    ) -> Observation:
        self.count += 1
        jitter = self.rng.uniform
        return Observation(
            agent_id="bot",
            variant=variant,
            episode_id=f"e{self.count}",
            passed=passed if passed is not None else self.rng.random() < pass_rate,
            latency_ms=latency * jitter(1 - noise, 1 + noise),
            cost_usd=cost * jitter(1 - noise, 1 + noise),
            overall=min(1.0, overall * jitter(1 - noise / 2, 1 + noise / 2)),
        )

    def feed(self, n: int, **kwargs: Any) -> list[AlertEvent]:
        new: list[AlertEvent] = []
        for _ in range(n):
            self.now += MINUTE
            new.extend(self.detector.observe(self.obs(**kwargs), self.now))
        self.events.extend(new)
        return new

    def baseline(self, n: int, **kwargs: Any) -> list[Observation]:
        return [self.obs(**kwargs) for _ in range(n)]


def states(events: list[AlertEvent]) -> list[tuple[str, str]]:
    return [(e.state.value, e.metric) for e in events if e.state is not AlertState.UPDATED]


# --- lifecycle ----------------------------------------------------------------------------


def test_sustained_regression_is_one_firing_with_updates_then_one_resolved() -> None:
    t = Traffic(RegressionDetector())
    assert t.feed(200) == []
    t.feed(300, cost=0.20)  # +100 % cost, sustained
    t.feed(300)  # recovered
    cost_events = [e for e in t.events if e.metric == COST]
    assert cost_events == t.events  # nothing else regressed
    assert cost_events[0].state is AlertState.FIRING
    assert cost_events[-1].state is AlertState.RESOLVED
    assert [e.state for e in cost_events[1:-1]] == [AlertState.UPDATED] * (len(cost_events) - 2)
    assert len(cost_events) > 2
    assert {e.dedupe_key for e in cost_events} == {"bot/A/cost_per_episode_usd"}
    assert {e.fired_at for e in cost_events} == {cost_events[0].at}
    firing = cost_events[0]
    assert firing.test == TEST_WELCH
    assert firing.p_value is not None
    assert firing.p_value < 0.05
    assert firing.change > 20.0
    assert firing.change_unit == "pct"
    assert firing.n_current >= 30
    assert firing.n_baseline >= 30
    assert cost_events[-1].reason == "recovered"
    # Updates are rate-limited: at most one per update interval (plus severity changes).
    span = cost_events[-1].at - firing.at
    severity_changes = sum(
        1 for a, b in itertools.pairwise(cost_events) if a.severity != b.severity
    )
    assert len(cost_events) - 2 <= span / RegressionConfig().update_interval_ms + severity_changes
    assert any(e.severity is Severity.CRITICAL for e in cost_events)
    orjson.dumps([e.to_json() for e in cost_events])


def test_the_baseline_is_frozen_while_firing() -> None:
    t = Traffic(RegressionDetector())
    t.feed(200)
    t.feed(600, cost=0.20)  # far longer than both windows
    assert states(t.events) == [("firing", COST)]
    assert t.detector.firing() == ["bot/A/cost_per_episode_usd"]


def test_fixed_baseline_window() -> None:
    t = Traffic(RegressionDetector())
    assert t.detector.set_baseline("bot", "A", t.baseline(100), t.now) == []
    t.feed(100, overall=0.6)
    t.feed(150)
    assert states(t.events) == [("firing", "score.overall"), ("resolved", "score.overall")]
    assert t.events[0].test == TEST_WELCH
    assert t.events[0].change < -0.05
    assert t.events[0].change_unit == "abs"


def test_improvements_never_alert() -> None:
    t = Traffic(RegressionDetector())
    t.feed(200)
    t.feed(200, cost=0.05, latency=500.0, overall=1.0)
    assert t.events == []


# --- sample size and significance ---------------------------------------------------------


def test_no_alert_below_the_minimum_sample_size_even_for_a_huge_change() -> None:
    t = Traffic(RegressionDetector())
    t.detector.set_baseline("bot", "A", t.baseline(29), t.now)  # one short of 30
    assert t.feed(200, cost=10.0, latency=50_000.0, passed=False, overall=0.0) == []


def test_the_current_window_needs_the_minimum_too() -> None:
    t = Traffic(RegressionDetector())
    t.detector.set_baseline("bot", "A", t.baseline(100), t.now)
    assert t.feed(29, cost=10.0) == []
    fired = t.feed(1, cost=10.0)
    assert [(e.state, e.metric) for e in fired] == [(AlertState.FIRING, COST)]
    assert fired[0].severity is Severity.CRITICAL
    assert fired[0].n_current == 30


def test_a_change_over_threshold_but_not_significant_does_not_alert() -> None:
    detector = RegressionDetector()
    base = [
        Observation("bot", "A", f"b{i}", True, 1000.0, cost_usd=2.0 * (i % 2)) for i in range(100)
    ]
    cur = [
        Observation("bot", "A", f"c{i}", True, 1000.0, cost_usd=2.5 * (i % 2)) for i in range(100)
    ]
    # The mean rose 25 % (> 20 %), but with this spread Welch's p is far above 0.05.
    base_costs = [o.cost_usd or 0.0 for o in base]
    cur_costs = [o.cost_usd or 0.0 for o in cur]
    assert mean(cur_costs) / mean(base_costs) - 1 == pytest.approx(0.25)
    assert welch_t_test(cur_costs, base_costs).p_value > 0.05
    detector.set_baseline("bot", "A", base, 0.0)
    events = [e for i, o in enumerate(cur) for e in detector.observe(o, i * MINUTE)]
    assert events == []


def test_pass_rate_drop_uses_newcombe() -> None:
    t = Traffic(RegressionDetector())
    t.detector.set_baseline("bot", "A", [t.obs(passed=i % 20 != 0) for i in range(100)], t.now)
    for i in range(60):  # 95 % -> 60 %
        t.now += MINUTE
        t.events.extend(t.detector.observe(t.obs(passed=i % 5 < 3), t.now))
    [firing] = [e for e in t.events if e.metric == PASS_RATE and e.state is AlertState.FIRING]
    assert firing.test == TEST_NEWCOMBE
    assert firing.interval is not None
    assert firing.interval[1] < 0
    assert firing.baseline_value == pytest.approx(0.95)


def test_p95_latency_rise_uses_the_bootstrap() -> None:
    t = Traffic(RegressionDetector())
    t.feed(200)
    t.feed(100, latency=2000.0)
    [firing] = [e for e in t.events if e.state is AlertState.FIRING]
    assert firing.metric == LATENCY_P95
    assert firing.test == TEST_BOOTSTRAP
    assert firing.interval is not None
    assert firing.interval[0] > 0
    assert firing.change > 20.0


def test_an_unbounded_cost_rise_is_critical() -> None:
    t = Traffic(RegressionDetector())
    t.detector.set_baseline("bot", "A", t.baseline(50, cost=0.0), t.now)
    fired = t.feed(30, cost=0.01)
    [event] = [e for e in fired if e.metric == COST]
    assert event.severity is Severity.CRITICAL
    record = event.to_json()
    assert record["change"] is None
    assert record["change_unbounded"] is True
    assert "unbounded" in event.message


# --- dedupe, cool-down, streams -----------------------------------------------------------


def test_cool_down_before_the_same_key_fires_again() -> None:
    config = RegressionConfig(cooldown_ms=60 * MINUTE)
    t = Traffic(RegressionDetector(config))
    t.detector.set_baseline("bot", "A", t.baseline(100), t.now)
    t.feed(60, cost=0.3)
    t.feed(120)
    resolved = [e for e in t.events if e.state is AlertState.RESOLVED]
    assert len(resolved) == 1
    again = t.feed(150, cost=0.3)
    refired = [e for e in again if e.state is AlertState.FIRING]
    assert len(refired) == 1
    assert refired[0].at >= resolved[0].at + config.cooldown_ms
    # Without the cool-down it would have fired as soon as 30 regressed episodes were in.
    assert refired[0].at - resolved[0].at > 30 * MINUTE


def test_streams_are_separate_per_agent_and_variant() -> None:
    t = Traffic(RegressionDetector())
    for _ in range(200):
        t.feed(1, variant="A")
        t.feed(1, variant="B")
    for _ in range(100):
        t.feed(1, variant="A")
        t.feed(1, variant="B", cost=0.3)
    assert {e.dedupe_key for e in t.events} == {"bot/B/cost_per_episode_usd"}


def test_evicted_streams_resolve_their_alerts() -> None:
    t = Traffic(RegressionDetector(RegressionConfig(max_streams=1)))
    t.detector.set_baseline("bot", "A", t.baseline(100), t.now)
    t.feed(40, cost=0.3)
    assert t.detector.firing() == ["bot/A/cost_per_episode_usd"]
    [resolved] = t.feed(1, variant="B")
    assert resolved.state is AlertState.RESOLVED
    assert resolved.reason == "evicted"
    assert resolved.dedupe_key == "bot/A/cost_per_episode_usd"
    assert len(t.detector) == 1


def test_rebaselining_resolves_what_fired_against_the_old_baseline() -> None:
    t = Traffic(RegressionDetector())
    t.detector.set_baseline("bot", "A", t.baseline(100), t.now)
    t.feed(40, cost=0.3)
    [resolved] = t.detector.set_baseline("bot", "A", t.baseline(100, cost=0.3), t.now)
    assert resolved.reason == "rebaselined"
    assert t.detector.firing() == []
    assert t.feed(50, cost=0.3) == []


def _latency_windows(base: list[float], cur: list[float]) -> list[AlertEvent]:
    detector = RegressionDetector(RegressionConfig(bootstrap_every=1))
    obs = [Observation("bot", "A", f"b{i}", True, v) for i, v in enumerate(base)]
    detector.set_baseline("bot", "A", obs, 0.0)
    return [
        e
        for i, v in enumerate(cur)
        for e in detector.observe(Observation("bot", "A", f"c{i}", True, v), (i + 1) * MINUTE)
    ]


def test_a_p95_rise_over_threshold_but_not_significant_does_not_alert() -> None:
    # The p95 rises 48.5 % (1010 -> 1500), but only 6 % of the current episodes are slow: a
    # resample holds fewer than 6 of them (its p95 back at 1000) with probability ~0.44.
    base = [1000.0] * 95 + [1200.0] * 5
    cur = [1000.0] * 94 + [1500.0] * 6
    assert percentile(cur, 95) / percentile(base, 95) - 1 == pytest.approx(1500 / 1010 - 1)
    assert exact_bootstrap_quantile_rise_p(sorted(base), sorted(cur)) > 0.025
    assert _latency_windows(base, cur) == []


def test_a_significant_p95_rise_fires_once_significant() -> None:
    base = [1000.0] * 95 + [1200.0] * 5
    cur = [1000.0] * 80 + [1500.0] * 20
    [firing] = _latency_windows(base, cur)
    assert (firing.metric, firing.state, firing.test) == (
        LATENCY_P95,
        AlertState.FIRING,
        TEST_BOOTSTRAP,
    )
    # It fired at the first observation whose windows are significant, not before.
    n = int(firing.n_current)
    window = sorted(cur[:n])
    assert exact_bootstrap_quantile_rise_p(sorted(base), window) < 0.025
    assert exact_bootstrap_quantile_rise_p(sorted(base), sorted(cur[: n - 1])) >= 0.025 or (
        percentile(cur[: n - 1], 95) <= 1.2 * percentile(base, 95)
    )
    assert firing.interval is not None
    assert firing.interval[0] > 0


# --- configuration and observations -------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        ({"window": 20}, "window .* must be >= min_samples"),
        ({"min_samples": 1, "window": 10}, "min_samples must be >= 2"),
        ({"alpha": 0}, "alpha"),
        ({"cost_rise_pct": {"warning": 30, "critical": 10}}, "critical"),
        ({"colour": 1}, "colour"),
        ({"cooldown_ms": -1}, "cooldown_ms"),
    ],
)
def test_bad_settings_are_named(obj: dict[str, Any], match: str) -> None:
    with pytest.raises(RegressionConfigError, match=match):
        RegressionConfig.load(obj)


def test_settings_load() -> None:
    config = RegressionConfig.load({"window": 50, "cost_rise_pct": {"warning": 10}})
    assert config.window == 50
    assert config.cost_rise_pct.warning == 10
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
    anonymous = ScoringInput(episode_id="e2", cost_complete=False)
    obs = Observation.from_scores(anonymous, score_episode(anonymous, None), passed=False)
    assert obs.agent_id == "unknown"
    assert obs.cost_usd is None
    assert obs.cost is None
