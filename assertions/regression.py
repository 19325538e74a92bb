"""Windowed regression detection per (`agent_id`, `variant`) (DESIGN §6, issue 4 item 4).

Per stream the detector keeps two windows of per-episode observations: the **current**
window (the last `window` episodes) and the **baseline** window — by default the `window`
episodes before them (an observation leaving the current window enters the baseline), or a
fixed set given with `set_baseline`. While any alert of a stream is firing its baseline is
frozen: regressed traffic never becomes the reference it is judged against.

Metrics and rules (thresholds are strict and configurable; defaults in `RegressionConfig`):

- `pass_rate`: the change is p_cur - p_base (a drop regresses); the test is Newcombe's hybrid
  score interval at confidence 1 - alpha, significant when its upper bound is below 0.
- `score.<dimension>`: mean_cur - mean_base (a drop regresses); Welch's t-test, significant
  when p < alpha and the mean dropped.
- `latency_p95_ms`: the Δ% of the p95 (a rise regresses); the exact percentile-bootstrap
  interval of the p95 difference at confidence 1 - alpha (`exact_bootstrap_quantile_diff_ci`:
  the bootstrap distribution computed without resampling, the p95 of each window taken as
  its order statistic x_(⌈0.95 n⌉)), significant when its lower bound is above 0, i.e. when
  P*(p95*_cur ≤ p95*_base) < alpha / 2.
- `cost_per_episode_usd`: the Δ% of the mean cost (a rise regresses); Welch's t-test,
  significant when p < alpha and the mean rose.

`score.<dimension>` covers overall, correctness, cost, tool_match, latency and safety (an
episode without a value for one is left out of that metric). An alert **fires** only when
both windows hold at least `min_samples` values of the metric, the change crosses a
threshold (WARNING, or CRITICAL beyond the second one) **and** the test finds it
significant in the regression direction. While firing it emits **updated** when its
severity changes, or at most once per `update_interval_ms` when its value moved; it
**resolves** once the change no longer crosses the WARNING threshold (significance is not
required to stay firing: hysteresis against flapping). After resolving, the same dedupe key
(`agent_id/variant/metric`) cannot fire again for `cooldown_ms`.

A rise from a zero baseline is unbounded (Δ = +inf). The p95 test runs at most once per
`bootstrap_every` observations of a stream while its threshold is crossed and nothing fires
(its decision costs one merge of the two windows' bootstrap supports, a few µs; the interval
itself is computed only for the events). The clock is injected: every call takes `now`
(epoch ms).
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from assertions.alert_rules import Severity
from assertions.errors import InputError
from assertions.scoring import DIMENSIONS, EpisodeScores, ScoringInput, delta_percent
from assertions.statistics import (
    exact_bootstrap_quantile_diff_ci,
    exact_bootstrap_quantile_rise_p,
    newcombe_interval,
    percentile_sorted,
    welch_t_test,
)

JSON = Any
PASS_RATE = "pass_rate"
LATENCY_P95 = "latency_p95_ms"
COST = "cost_per_episode_usd"
SCORE_METRICS = tuple(f"score.{d}" for d in ("overall", *DIMENSIONS))
METRICS = (PASS_RATE, *SCORE_METRICS, LATENCY_P95, COST)
# Index of each metric's value in an observation's value tuple (the p95 uses latencies).
_SLOT = {PASS_RATE: 0, **{m: i + 1 for i, m in enumerate(SCORE_METRICS)}, COST: 7}
_SLOTS = 8
TEST_NEWCOMBE = "newcombe-hybrid-score-interval"
TEST_WELCH = "welch-t-test"
TEST_BOOTSTRAP = "exact-bootstrap-p95-difference-ci"
_SLACK = 1e-9  # the running-sum pre-check never misses a crossing by rounding


class RegressionConfigError(InputError):
    """Regression detection settings that do not validate."""


class Thresholds(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    warning: float
    critical: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if not math.isfinite(self.warning) or self.warning < 0:
            raise ValueError(f"warning must be a finite number >= 0, got {self.warning!r}")
        if self.critical is not None and not (
            math.isfinite(self.critical) and self.critical >= self.warning
        ):
            raise ValueError(f"critical ({self.critical}) must be finite and >= warning")
        return self

    def crossed(self, change: float) -> tuple[Severity, float] | None:
        """The severity whose threshold `change` (a regression measured positive) exceeds."""
        if self.critical is not None and change > self.critical:
            return Severity.CRITICAL, self.critical
        if change > self.warning:
            return Severity.WARNING, self.warning
        return None


class RegressionConfig(BaseModel):
    """Windowed detection settings; loadable from YAML/JSON dicts with `load`.

    Defaults: windows of 100 episodes, at least 30 per window, alpha = 0.05; a pass rate drop of
    more than 5 points (WARNING) / 15 points (CRITICAL); a mean score drop of more than 0.05 /
    0.15; a p95 latency rise of more than 20 % / 50 %; a mean cost rise of more than
    20 % / 50 %; 15 minutes of cool-down; an update at most every 5 minutes.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    window: int = 100
    min_samples: int = 30
    alpha: float = 0.05
    pass_rate_drop: Thresholds = Thresholds(warning=0.05, critical=0.15)
    score_drop: Thresholds = Thresholds(warning=0.05, critical=0.15)
    latency_p95_rise_pct: Thresholds = Thresholds(warning=20.0, critical=50.0)
    cost_rise_pct: Thresholds = Thresholds(warning=20.0, critical=50.0)
    cooldown_ms: float = 900_000.0
    update_interval_ms: float = 300_000.0
    bootstrap_every: int = 5
    max_streams: int = 1000

    @model_validator(mode="after")
    def _valid(self) -> RegressionConfig:
        if self.min_samples < 2:
            raise ValueError(
                f"min_samples must be >= 2 (the tests need a variance), got {self.min_samples}"
            )
        if self.window < self.min_samples:
            raise ValueError(f"window ({self.window}) must be >= min_samples ({self.min_samples})")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be within (0, 1), got {self.alpha}")
        for name in ("cooldown_ms", "update_interval_ms"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        for name in ("bootstrap_every", "max_streams"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        return self

    @classmethod
    def load(cls, obj: Mapping[str, JSON] | None) -> RegressionConfig:
        try:
            return cls.model_validate(obj or {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '<config>'}: {err['msg']}"
                for err in exc.errors()
            )
            raise RegressionConfigError(f"invalid regression settings: {problems}") from exc

    def thresholds(self, metric: str) -> Thresholds:
        if metric == PASS_RATE:
            return self.pass_rate_drop
        if metric == LATENCY_P95:
            return self.latency_p95_rise_pct
        if metric == COST:
            return self.cost_rise_pct
        return self.score_drop


@dataclass(frozen=True, slots=True)
class Observation:
    """One scored episode as the detector sees it (a None score: not scored)."""

    agent_id: str
    variant: str
    episode_id: str
    passed: bool
    latency_ms: float
    cost_usd: float | None = None
    overall: float | None = None
    correctness: float | None = None
    cost: float | None = None
    tool_match: float | None = None
    latency: float | None = None
    safety: float | None = None

    @classmethod
    def from_scores(
        cls,
        inp: ScoringInput,
        scores: EpisodeScores,
        passed: bool,
        *,
        agent_attr: str = "agent_id",
        variant_attr: str = "variant",
    ) -> Observation:
        """Missing attrs default to agent `unknown` and variant `default`; an incomplete cost
        is left out of the cost metric."""
        agent = inp.attrs.get(agent_attr)
        variant = inp.attrs.get(variant_attr)
        return cls(
            agent_id=str(agent) if agent is not None else "unknown",
            variant=str(variant) if variant is not None else "default",
            episode_id=inp.episode_id,
            passed=passed,
            latency_ms=inp.latency_ms,
            cost_usd=inp.cost_usd if inp.cost_complete else None,
            overall=scores.overall,
            correctness=scores.correctness,
            cost=scores.cost,
            tool_match=scores.tool_match,
            latency=scores.latency,
            safety=scores.safety,
        )

    def values(self) -> tuple[float | None, ...]:
        """Per slot: passed (0/1), overall, the five dimensions, cost in USD."""
        return (
            1.0 if self.passed else 0.0,
            self.overall,
            self.correctness,
            self.cost,
            self.tool_match,
            self.latency,
            self.safety,
            self.cost_usd,
        )


class _Window:
    """A bounded window with, per slot, its values in arrival order and their running sum,
    and the latencies sorted.

    The exact mean (`math.fsum`, exactly rounded) of a slot is cached until the next push:
    a firing alert's frozen baseline window is summed once, not per observation.
    """

    __slots__ = ("columns", "evictions", "exact", "items", "latencies", "maxlen", "ns", "sums")

    def __init__(self, maxlen: int) -> None:
        self.maxlen = maxlen
        self.items: deque[tuple[tuple[float | None, ...], float]] = deque()
        self.columns: list[deque[float]] = [deque() for _ in range(_SLOTS)]
        self.sums = [0.0] * _SLOTS
        self.ns = [0] * _SLOTS
        self.latencies: list[float] = []
        self.evictions = 0
        self.exact: list[float | None] = [None] * _SLOTS

    def push(
        self, item: tuple[tuple[float | None, ...], float]
    ) -> tuple[tuple[float | None, ...], float] | None:
        evicted = None
        if len(self.items) >= self.maxlen:
            evicted = self.items.popleft()
            self._remove(evicted)
        self.items.append(item)
        values, latency = item
        sums, ns, columns = self.sums, self.ns, self.columns
        for i, v in enumerate(values):
            if v is not None:
                sums[i] += v
                ns[i] += 1
                columns[i].append(v)
        bisect.insort(self.latencies, latency)
        self.exact = [None] * _SLOTS
        return evicted

    def _remove(self, item: tuple[tuple[float | None, ...], float]) -> None:
        values, latency = item
        sums, ns, columns = self.sums, self.ns, self.columns
        for i, v in enumerate(values):
            if v is not None:
                sums[i] -= v
                ns[i] -= 1
                columns[i].popleft()  # the oldest value of the slot is this item's
        del self.latencies[bisect.bisect_left(self.latencies, latency)]
        self.evictions += 1
        if self.evictions % self.maxlen == 0:  # stop rounding drift of the running sums
            self.sums = [math.fsum(column) for column in columns]

    def column(self, slot: int) -> list[float]:
        return list(self.columns[slot])

    def count(self, metric: str) -> int:
        return len(self.items) if metric == LATENCY_P95 else self.ns[_SLOT[metric]]

    def estimate(self, metric: str, *, exact: bool = False) -> float:
        """The window's value of a metric: a mean, a rate, or the p95 of latency."""
        if metric == LATENCY_P95:
            return percentile_sorted(self.latencies, 95.0)
        slot = _SLOT[metric]
        if exact:
            value = self.exact[slot]
            if value is None:
                column = self.columns[slot]
                value = self.exact[slot] = math.fsum(column) / len(column)
            return value
        return self.sums[slot] / self.ns[slot]


class AlertState(StrEnum):
    FIRING = "firing"
    UPDATED = "updated"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class AlertEvent:
    """A lifecycle event of one windowed alert.

    `change` is absolute (pass rate, scores: current - baseline) or a percentage (p95 latency,
    cost: `change_unit == "pct"`, +inf when unbounded). `test` names the significance test;
    `p_value` (Welch) or `interval` (Newcombe, bootstrap) is its result when it fired.
    """

    state: AlertState
    agent_id: str
    variant: str
    metric: str
    severity: Severity
    baseline_value: float
    current_value: float
    change: float
    change_unit: str
    threshold: float
    test: str
    p_value: float | None
    interval: tuple[float, float] | None
    n_baseline: int
    n_current: int
    fired_at: float
    at: float
    message: str
    reason: str | None = None

    @property
    def dedupe_key(self) -> str:
        return f"{self.agent_id}/{self.variant}/{self.metric}"

    def to_json(self) -> dict[str, JSON]:
        unbounded = math.isinf(self.change)
        return {
            "dedupe_key": self.dedupe_key,
            "state": self.state.value,
            "agent_id": self.agent_id,
            "variant": self.variant,
            "metric": self.metric,
            "severity": self.severity.value,
            "baseline_value": self.baseline_value,
            "current_value": self.current_value,
            "change": None if unbounded else self.change,
            "change_unbounded": unbounded,
            "change_unit": self.change_unit,
            "threshold": self.threshold,
            "test": self.test,
            "p_value": self.p_value,
            "interval": None if self.interval is None else list(self.interval),
            "n_baseline": self.n_baseline,
            "n_current": self.n_current,
            "fired_at": self.fired_at,
            "at": self.at,
            "message": self.message,
            "reason": self.reason,
        }


@dataclass(slots=True)
class _Firing:
    severity: Severity
    threshold: float
    test: str
    p_value: float | None
    interval: tuple[float, float] | None
    fired_at: float
    last_update: float
    last_change: float


@dataclass(frozen=True, slots=True)
class _Test:
    name: str
    significant: bool
    p_value: float | None = None
    interval: tuple[float, float] | None = None


@dataclass(slots=True)
class _Stream:
    agent_id: str
    variant: str
    current: _Window
    baseline: _Window
    fixed: bool = False
    observed: int = 0
    firing: dict[str, _Firing] = field(default_factory=dict)
    cooldown_until: dict[str, float] = field(default_factory=dict)
    last_bootstrap: int | None = None


class RegressionDetector:
    """Windowed detection over many streams; at most `max_streams`, least recently observed
    evicted first (their firing alerts resolve with reason `evicted`)."""

    def __init__(self, config: RegressionConfig | None = None) -> None:
        self.config = config or RegressionConfig()
        self._streams: OrderedDict[tuple[str, str], _Stream] = OrderedDict()
        # Per metric in METRICS order: (metric, value slot or -1 for the p95, WARNING threshold).
        self._plan = tuple(
            (m, _SLOT.get(m, -1), self.config.thresholds(m).warning) for m in METRICS
        )

    def __len__(self) -> int:
        return len(self._streams)

    def firing(self) -> list[str]:
        """Dedupe keys of the alerts firing now."""
        return [
            f"{s.agent_id}/{s.variant}/{metric}"
            for s in self._streams.values()
            for metric in s.firing
        ]

    def _stream(self, agent_id: str, variant: str, now: float) -> tuple[_Stream, list[AlertEvent]]:
        key = (agent_id, variant)
        stream = self._streams.get(key)
        events: list[AlertEvent] = []
        if stream is None:
            w = self.config.window
            stream = self._streams[key] = _Stream(agent_id, variant, _Window(w), _Window(w))
            while len(self._streams) > self.config.max_streams:
                _, old = self._streams.popitem(last=False)
                events.extend(self._resolve_all(old, now, "evicted"))
        else:
            self._streams.move_to_end(key)
        return stream, events

    def set_baseline(
        self, agent_id: str, variant: str, observations: Iterable[Observation], now: float
    ) -> list[AlertEvent]:
        """Fix a stream's baseline window to these observations (the last `window` of them);
        it no longer rolls. Alerts firing against the old baseline resolve (`rebaselined`)."""
        stream, events = self._stream(agent_id, variant, now)
        events.extend(self._resolve_all(stream, now, "rebaselined"))
        stream.baseline = _Window(self.config.window)
        for obs in observations:
            stream.baseline.push((obs.values(), obs.latency_ms))
        stream.fixed = True
        return events

    def observe(self, obs: Observation, now: float) -> list[AlertEvent]:
        stream, events = self._stream(obs.agent_id, obs.variant, now)
        stream.observed += 1
        evicted = stream.current.push((obs.values(), obs.latency_ms))
        if evicted is not None and not stream.fixed and not stream.firing:
            stream.baseline.push(evicted)
        cur_w, base_w, firing = stream.current, stream.baseline, stream.firing
        min_samples = self.config.min_samples
        for metric, slot, warning in self._plan:
            if metric not in firing:
                # The cheap part of `_evaluate`'s first checks, inlined: most metrics of
                # most observations stop here (too few samples, or far from the threshold).
                if slot < 0:
                    if len(base_w.items) < min_samples or len(cur_w.items) < min_samples:
                        continue
                    rough_base = percentile_sorted(base_w.latencies, 95.0)
                    rough = delta_percent(percentile_sorted(cur_w.latencies, 95.0), rough_base)
                else:
                    nb, nc = base_w.ns[slot], cur_w.ns[slot]
                    if nb < min_samples or nc < min_samples:
                        continue
                    rough_base = base_w.sums[slot] / nb
                    rough_cur = cur_w.sums[slot] / nc
                    rough = (
                        delta_percent(rough_cur, rough_base)
                        if metric == COST
                        else rough_base - rough_cur
                    )
                if abs(rough_base) > _SLACK and not rough > warning - _SLACK:
                    continue
            event = self._evaluate(stream, metric, now)
            if event is not None:
                events.append(event)
        return events

    # --- per metric -----------------------------------------------------------------------

    def _change(self, stream: _Stream, metric: str, *, exact: bool) -> tuple[float, float, float]:
        """(baseline value, current value, regression measured positive)."""
        base = stream.baseline.estimate(metric, exact=exact)
        cur = stream.current.estimate(metric, exact=exact)
        if metric in (LATENCY_P95, COST):
            return base, cur, delta_percent(cur, base)
        return base, cur, base - cur

    def _evaluate(self, stream: _Stream, metric: str, now: float) -> AlertEvent | None:
        cfg = self.config
        nb = stream.baseline.count(metric)
        nc = stream.current.count(metric)
        if nb < cfg.min_samples or nc < cfg.min_samples:
            return None
        thresholds = cfg.thresholds(metric)
        firing = stream.firing.get(metric)
        if firing is None:
            rough_base, _, rough = self._change(stream, metric, exact=False)
            # Running sums may drift around an all-zero baseline: decide those exactly.
            if abs(rough_base) > _SLACK and not rough > thresholds.warning - _SLACK:
                return None
            if now < stream.cooldown_until.get(metric, -math.inf):
                return None
            base, cur, change = self._change(stream, metric, exact=True)
            crossed = thresholds.crossed(change)
            if crossed is None:
                return None
            test = self._test(stream, metric)
            if test is None or not test.significant:
                return None
            severity, threshold = crossed
            stream.firing[metric] = _Firing(
                severity, threshold, test.name, test.p_value, test.interval, now, now, change
            )
            return self._event(AlertState.FIRING, stream, metric, (base, cur, change), now)
        base, cur, change = self._change(stream, metric, exact=True)
        crossed = thresholds.crossed(change)
        if crossed is None:
            del stream.firing[metric]
            stream.cooldown_until[metric] = now + cfg.cooldown_ms
            return self._event(
                AlertState.RESOLVED,
                stream,
                metric,
                (base, cur, change),
                now,
                firing=firing,
                reason="recovered",
            )
        severity, threshold = crossed
        due = now - firing.last_update >= cfg.update_interval_ms and change != firing.last_change
        if severity is firing.severity and not due:
            return None
        firing.severity, firing.threshold = severity, threshold
        firing.last_update, firing.last_change = now, change
        # An update carries the test on the windows as they are now (for the record only:
        # staying firing does not need significance).
        test = self._test(stream, metric, throttle=False)
        if test is not None:
            firing.p_value, firing.interval = test.p_value, test.interval
        return self._event(AlertState.UPDATED, stream, metric, (base, cur, change), now)

    def _test(self, stream: _Stream, metric: str, *, throttle: bool = True) -> _Test | None:
        cfg = self.config
        confidence = 1.0 - cfg.alpha
        base_w, cur_w = stream.baseline, stream.current
        if metric == PASS_RATE:
            slot = _SLOT[PASS_RATE]
            cur_passed = cur_w.column(slot)
            base_passed = base_w.column(slot)
            interval = newcombe_interval(
                sum(1 for v in cur_passed if v),
                len(cur_passed),
                sum(1 for v in base_passed if v),
                len(base_passed),
                confidence,
            )
            return _Test(TEST_NEWCOMBE, interval.high < 0.0, None, (interval.low, interval.high))
        if metric == LATENCY_P95:
            # While the threshold stays crossed without significance, rerun the test only
            # every `bootstrap_every` observations; the interval is only computed for events.
            last = stream.last_bootstrap
            if throttle:
                if last is not None and stream.observed - last < cfg.bootstrap_every:
                    return None
                stream.last_bootstrap = stream.observed
                rise_p = exact_bootstrap_quantile_rise_p(base_w.latencies, cur_w.latencies)
                if not rise_p < cfg.alpha / 2.0:
                    return _Test(TEST_BOOTSTRAP, False)
            ci = exact_bootstrap_quantile_diff_ci(
                base_w.latencies, cur_w.latencies, q=95.0, confidence=confidence
            )
            # Throttled: significance was decided above (rise_p), the same as ci.low > 0.
            return _Test(TEST_BOOTSTRAP, throttle or ci.low > 0.0, None, (ci.low, ci.high))
        slot = _SLOT[metric]
        result = welch_t_test(cur_w.column(slot), base_w.column(slot))
        worse = result.mean_diff > 0.0 if metric == COST else result.mean_diff < 0.0
        return _Test(TEST_WELCH, worse and result.p_value < cfg.alpha, result.p_value, None)

    def _event(
        self,
        state: AlertState,
        stream: _Stream,
        metric: str,
        measured: tuple[float, float, float],
        now: float,
        *,
        firing: _Firing | None = None,
        reason: str | None = None,
    ) -> AlertEvent:
        base, cur, change = measured
        f = firing or stream.firing[metric]
        pct = metric in (LATENCY_P95, COST)
        # Report the signed change (current - baseline), not the regression-positive one.
        signed = change if pct else -change
        shown = (
            ("unbounded (baseline 0)" if math.isinf(signed) else f"{signed:+.1f} %")
            if pct
            else f"{signed:+.3f}"
        )
        what = {
            AlertState.FIRING: "regressed",
            AlertState.UPDATED: "still regressed",
            AlertState.RESOLVED: "recovered",
        }[state]
        message = (
            f"{stream.agent_id}/{stream.variant} {metric} {what}: {cur:.4g} vs baseline "
            f"{base:.4g} ({shown}; threshold {f.threshold:g}{' %' if pct else ''}; {f.test})"
        )
        return AlertEvent(
            state=state,
            agent_id=stream.agent_id,
            variant=stream.variant,
            metric=metric,
            severity=f.severity,
            baseline_value=base,
            current_value=cur,
            change=signed,
            change_unit="pct" if pct else "abs",
            threshold=f.threshold,
            test=f.test,
            p_value=f.p_value,
            interval=f.interval,
            n_baseline=stream.baseline.count(metric),
            n_current=stream.current.count(metric),
            fired_at=f.fired_at,
            at=now,
            message=message,
            reason=reason,
        )

    def _resolve_all(self, stream: _Stream, now: float, reason: str) -> list[AlertEvent]:
        events = []
        for metric, f in list(stream.firing.items()):
            base, cur, change = self._change(stream, metric, exact=True)
            events.append(
                self._event(
                    AlertState.RESOLVED,
                    stream,
                    metric,
                    (base, cur, change),
                    now,
                    firing=f,
                    reason=reason,
                )
            )
            stream.cooldown_until[metric] = now + self.config.cooldown_ms
        stream.firing.clear()
        return events
