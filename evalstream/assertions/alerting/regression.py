"""Continuous regression detection per (`agent_id`, `variant`) (DESIGN §6).

Every scored episode is tested the moment it is scored, so the detector is a method made
for continuous monitoring: a one-sided CUSUM per metric, in the direction of a regression,
against a baseline estimated robustly from the stream's own scored episodes.

Per stream:

- **Reference**: the baseline is estimated from the last `reference` scored observations
  that are older than the newest `guard` ones (a regression has `guard` observations to be
  detected before it could enter the reference). Nothing is tested until the reference of
  a metric is full; it then rolls, re-estimated every `refresh` admitted observations. The
  pass rate's reference keeps growing to `pass_rate_reference` observations: failures are
  rare, and a rate estimated from 150 episodes (about 7 failures at 5 %) is too noisy for
  a CUSUM designed for a 10-point drop.
  While any alert of the stream is firing nothing enters it, and the guarded observations
  of the regression are discarded when it fires and when it resolves (regressed traffic
  never becomes its own reference). `set_baseline` fixes the reference instead.
- **Observations**: cost and latency on a log scale (log(cost + 1e-6 USD),
  log(latency + 1 ms)), standardized by the reference's median and robust standard deviation;
  scores standardized by the reference's mean and standard deviation (at least half the
  score WARNING threshold); both clipped to ±`clip` so a single outlier cannot fire. The pass
  rate uses a Bernoulli log-likelihood ratio: failure rate q0 (the reference's, smoothed,
  plus `Q0_MARGIN_SE` standard errors, so that a reference that saw few failures does not
  make ordinary ones look like a drop) against the reference's rate + `pass_rate_shift`.
  Episodes scored without a baseline while one was expected (`Observation.warmup`) count
  only for cost and latency.
- **Firing**: S = max(0, S + u - k) (u the standardized regression, k = `shift_sigmas` / 2)
  crosses h, the threshold of a design in-control run length (`arl0`, `pass_rate_arl0`,
  see `evalstream.assertions.alerting.cusum`), **and** the change estimated since the change point
  (the last time S was 0, at most `recent` observations) crosses the metric's WARNING threshold
  (CRITICAL beyond the second). A crossing without a material change waits at S = h.
- **Resolving**: while firing, a CUSUM in the other direction tests a return to the
  baseline (reference: half the shift estimated since the change point; for the pass rate,
  q0 against the failure rate since the change point, at most the design's, so that a burst
  of failures that fired early does not make the regressed rate pass for a recovery); the
  alert resolves when it crosses h — when the evidence no longer supports the regression —
  never merely because a threshold is no longer crossed. The dedupe key
  (`agent_id/variant/metric`) then cannot fire again for `cooldown_ms`.
- **Updates**: an UPDATED event when the severity changes or the estimated change moved by
  at least the metric's WARNING threshold, three standard errors of the estimate and half
  the last reported change, at most once per `update_interval_ms` (an escalation to CRITICAL is
  not delayed). While firing, the severity moves up to CRITICAL only when the change exceeds
  its threshold by two standard errors, and back only when it falls half a WARNING threshold
  (or two standard errors, if more) below it.

The metric names are those of the Prometheus series and rules. `latency_p95_ms` detects a
shift of the latency distribution on the log scale; its events report the p95 of the
reference and that p95 moved by the estimated shift. `cost_per_episode_usd` reports the
median cost of the reference and the geometric mean since the change point. The clock is
injected: every call takes `now` (epoch ms, the episode's end for scored traffic).
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from evalstream.assertions.alerting.alert_rules import Severity
from evalstream.assertions.alerting.cusum import (
    bernoulli_llr,
    bernoulli_threshold,
    mean_scale,
    normal_threshold,
    robust_location_scale,
    robust_location_scale_sorted,
)
from evalstream.assertions.alerting.sorted_window import SortedWindow
from evalstream.assertions.errors import InputError
from evalstream.assertions.scores.dimensions import (
    DIMENSIONS,
    EpisodeScores,
    ScoringInput,
    delta_percent,
)
from evalstream.assertions.statistics import percentile_sorted

JSON = Any
PASS_RATE = "pass_rate"
LATENCY_P95 = "latency_p95_ms"
COST = "cost_per_episode_usd"
SCORE_METRICS = tuple(f"score.{d}" for d in ("overall", *DIMENSIONS))
METRICS = (PASS_RATE, *SCORE_METRICS, LATENCY_P95, COST)
# Monitored unless `metrics` says otherwise: the three whose false-alarm rate and delay are
# measured (docs/scoring.md). Scores are opt-in: most are pass/fail-like (correctness,
# safety) and covered by the pass rate, or restate cost and latency against the per-key
# baseline; their skewed distributions make a Gaussian CUSUM's run length optimistic.
DEFAULT_METRICS = (PASS_RATE, LATENCY_P95, COST)
# Index of each metric's value in an observation's value tuple.
_SLOT = {PASS_RATE: 0, **{m: i + 1 for i, m in enumerate(SCORE_METRICS)}, COST: 7, LATENCY_P95: 8}
_SLOTS = 9
_LOG_SLOTS = (7, 8)  # cost and latency: estimated from medians, so kept sorted
TEST_CUSUM = "cusum"
COST_OFFSET_USD = 1e-6  # log(cost + offset): a free episode has a finite log cost
LATENCY_OFFSET_MS = 1.0
MIN_FIXED_REFERENCE = 30  # a fixed baseline needs at least this many values of a metric
Q0_MARGIN_SE = 2.0  # the pass rate CUSUM is designed for q0 this many standard errors up
_LOG_SCALE_FLOOR = 0.01  # 1 %: a constant cost or latency still has a scale
_REMOVED = {"window", "min_samples", "alpha", "bootstrap_every"}


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
    """Continuous detection settings; loadable from YAML/JSON dicts with `load`.

    Defaults: a reference of 150 scored episodes behind a guard of 100 (the pass rate's
    growing to 1000); CUSUMs designed for a 1-standard-deviation shift (cost, latency,
    scores) with an in-control run length of 1,000,000 episodes each, and for a pass-rate
    drop of 10 points with 10,000 (designed for the failure rate two standard errors above
    the reference's, which lengthens the real run); a pass rate drop of more than 5 points
    (WARNING) / 15 points (CRITICAL); a mean score drop of more than 0.05 / 0.15; a latency
    rise of more than 20 % / 50 %; a cost rise of more than 20 % / 50 %; 15 minutes of
    cool-down; an update at most every 5 minutes.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    metrics: tuple[str, ...] = DEFAULT_METRICS
    reference: int = 150
    pass_rate_reference: int = 1000
    guard: int = 100
    refresh: int = 10
    recent: int = 100
    arl0: float = 1_000_000.0
    pass_rate_arl0: float = 10_000.0
    shift_sigmas: float = 1.0
    pass_rate_shift: float = 0.10
    clip: float = 4.0
    pass_rate_drop: Thresholds = Thresholds(warning=0.05, critical=0.15)
    score_drop: Thresholds = Thresholds(warning=0.05, critical=0.15)
    latency_p95_rise_pct: Thresholds = Thresholds(warning=20.0, critical=50.0)
    cost_rise_pct: Thresholds = Thresholds(warning=20.0, critical=50.0)
    cooldown_ms: float = 900_000.0
    update_interval_ms: float = 300_000.0
    max_streams: int = 1000

    @model_validator(mode="after")
    def _valid(self) -> RegressionConfig:
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown:
            raise ValueError(f"unknown metric(s) {', '.join(unknown)}; valid: {', '.join(METRICS)}")
        for name in ("reference", "pass_rate_reference", "guard", "refresh", "recent"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_streams < 1:
            raise ValueError(f"max_streams must be >= 1, got {self.max_streams}")
        if self.reference < MIN_FIXED_REFERENCE:
            raise ValueError(f"reference must be >= {MIN_FIXED_REFERENCE}, got {self.reference}")
        if self.pass_rate_reference < self.reference:
            raise ValueError(
                f"pass_rate_reference ({self.pass_rate_reference}) must be >= reference "
                f"({self.reference})"
            )
        for name in ("arl0", "pass_rate_arl0"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 1.0):
                raise ValueError(f"{name} must be a finite number > 1, got {getattr(self, name)}")
        if not (math.isfinite(self.shift_sigmas) and self.shift_sigmas > 0):
            raise ValueError(f"shift_sigmas must be > 0, got {self.shift_sigmas}")
        if not 0.0 < self.pass_rate_shift < 0.9:
            raise ValueError(f"pass_rate_shift must be within (0, 0.9), got {self.pass_rate_shift}")
        if not (math.isfinite(self.clip) and self.clip > self.shift_sigmas / 2.0):
            raise ValueError(f"clip must exceed shift_sigmas / 2, got {self.clip}")
        for name in ("cooldown_ms", "update_interval_ms"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        return self

    @classmethod
    def load(cls, obj: Mapping[str, JSON] | None) -> RegressionConfig:
        removed = sorted(_REMOVED & set(obj or {}))
        if removed:
            raise RegressionConfigError(
                f"invalid regression settings: {', '.join(removed)} no longer exist (the "
                "windowed tests were replaced by CUSUMs); use reference, guard, arl0, "
                "shift_sigmas and pass_rate_shift (docs/scoring.md)"
            )
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
    """One scored episode as the detector sees it (a None score: not scored).

    `passed`: the episode's quality outcome (`alert_rules.quality_passes`), which the pass
    rate watches; a CRITICAL cost or latency alert fails the episode but not this pass, as
    cost and latency have metrics of their own.

    `warmup`: scored without a baseline while one was expected (the key's baseline was still
    filling); such an episode passes for want of a comparison, so only its cost and latency
    are observed."""

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
    warmup: bool = False

    @classmethod
    def from_scores(
        cls,
        inp: ScoringInput,
        scores: EpisodeScores,
        passed: bool,
        *,
        agent_attr: str = "agent_id",
        variant_attr: str = "variant",
        warmup: bool = False,
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
            warmup=warmup,
        )

    def values(self) -> tuple[float | None, ...]:
        """Per slot: failed (0/1), overall, the five dimensions, log cost, log latency."""
        scored = not self.warmup
        cost = self.cost_usd
        return (
            (0.0 if self.passed else 1.0) if scored else None,
            self.overall if scored else None,
            self.correctness if scored else None,
            self.cost if scored else None,
            self.tool_match if scored else None,
            self.latency if scored else None,
            self.safety if scored else None,
            None if cost is None or not cost >= 0 else math.log(cost + COST_OFFSET_USD),
            math.log(max(self.latency_ms, 0.0) + LATENCY_OFFSET_MS),
        )


class AlertState(StrEnum):
    FIRING = "firing"
    UPDATED = "updated"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class AlertEvent:
    """A lifecycle event of one regression alert.

    `change` is absolute (pass rate, scores: current - baseline) or a percentage (latency,
    cost: `change_unit == "pct"`, +inf when unbounded). `test` names the test (`cusum`);
    `statistic` is its CUSUM value when the event was made and `limit` the threshold h it is
    compared with (for a resolution: the recovery CUSUM). `n_baseline` counts the reference
    values, `n_current` the observations since the estimated change point."""

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
    statistic: float | None = None
    limit: float | None = None

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
            "statistic": self.statistic,
            "limit": self.limit,
            "n_baseline": self.n_baseline,
            "n_current": self.n_current,
            "fired_at": self.fired_at,
            "at": self.at,
            "message": self.message,
            "reason": self.reason,
        }


@dataclass(slots=True)
class _Param:
    """A metric's baseline: center and scale (Gaussian), or q0 and the LLR steps (pass)."""

    center: float
    scale: float
    h: float
    p95: float = 0.0  # latency: the reference's p95 in ms
    q0: float = 0.0  # pass rate: the smoothed failure rate the CUSUM is designed for
    llr_fail: float = 0.0
    llr_ok: float = 0.0


@dataclass(slots=True)
class _Cusum:
    s: float = 0.0  # the regression CUSUM
    run: int = 0  # observations since S was last 0 (the estimated change point)
    shift_sum: float = 0.0  # sum of the regression-positive steps since the change point
    r: float = 0.0  # the recovery CUSUM (while firing)
    firing: _Firing | None = None


@dataclass(slots=True)
class _Firing:
    severity: Severity
    threshold: float
    fired_at: float
    last_update: float
    last_change: float


@dataclass(slots=True)
class _Stream:
    agent_id: str
    variant: str
    reference: list[deque[float] | SortedWindow]
    recent: list[deque[float]]
    guard: list[deque[float]]
    params: list[_Param | None]
    cusums: dict[str, _Cusum]
    fixed: bool = False
    admitted: int = 0
    cooldown_until: dict[str, float] = field(default_factory=dict)

    def any_firing(self) -> bool:
        return any(c.firing is not None for c in self.cusums.values())


@dataclass(frozen=True, slots=True)
class _Estimate:
    baseline: float
    current: float
    change: float  # regression measured positive (pct for cost and latency)
    noise: float = 0.0  # two standard errors of `change` (its unit)


class RegressionDetector:
    """Continuous detection over many streams; at most `max_streams`, least recently
    observed evicted first (their firing alerts resolve with reason `evicted`)."""

    def __init__(self, config: RegressionConfig | None = None) -> None:
        self.config = config or RegressionConfig()
        cfg = self.config
        self._streams: OrderedDict[tuple[str, str], _Stream] = OrderedDict()
        self._k = cfg.shift_sigmas / 2.0
        self._h = normal_threshold(self._k, cfg.arl0)
        self._plan = tuple((m, _SLOT[m]) for m in METRICS if m in cfg.metrics)

    def __len__(self) -> int:
        return len(self._streams)

    @property
    def threshold(self) -> float:
        """h of the Gaussian CUSUMs (the pass rate's depends on the reference's q0)."""
        return self._h

    def firing(self) -> list[str]:
        """Dedupe keys of the alerts firing now."""
        return [
            f"{s.agent_id}/{s.variant}/{metric}"
            for s in self._streams.values()
            for metric, c in s.cusums.items()
            if c.firing is not None
        ]

    def holding(self, agent_id: str, variant: str) -> bool:
        """Whether an alert of this stream is firing: its episodes are regressed traffic that
        a rolling baseline must not learn."""
        stream = self._streams.get((agent_id, variant))
        return stream is not None and stream.any_firing()

    def _stream(self, agent_id: str, variant: str, now: float) -> tuple[_Stream, list[AlertEvent]]:
        key = (agent_id, variant)
        stream = self._streams.get(key)
        events: list[AlertEvent] = []
        if stream is None:
            cfg = self.config
            stream = self._streams[key] = _Stream(
                agent_id,
                variant,
                reference=[
                    SortedWindow(cfg.reference)
                    if slot in _LOG_SLOTS
                    else deque(maxlen=cfg.pass_rate_reference if slot == 0 else cfg.reference)
                    for slot in range(_SLOTS)
                ],
                recent=[deque(maxlen=cfg.recent) for _ in range(_SLOTS)],
                guard=[deque() for _ in range(_SLOTS)],
                params=[None] * _SLOTS,
                cusums={m: _Cusum() for m, _ in self._plan},
            )
            while len(self._streams) > cfg.max_streams:
                _, old = self._streams.popitem(last=False)
                events.extend(self._resolve_all(old, now, "evicted"))
        else:
            self._streams.move_to_end(key)
        return stream, events

    def set_baseline(
        self, agent_id: str, variant: str, observations: Iterable[Observation], now: float
    ) -> list[AlertEvent]:
        """Fix a stream's reference to these observations (the last `reference` of each
        metric, `pass_rate_reference` of the pass rate); it no longer rolls. Alerts firing
        against the old one resolve (`rebaselined`)."""
        stream, events = self._stream(agent_id, variant, now)
        events.extend(self._resolve_all(stream, now, "rebaselined"))
        stream.fixed = True
        for column in (*stream.guard, *stream.reference):
            column.clear()
        for obs in observations:
            self._admit(stream, obs.values())
        for slot in range(_SLOTS):
            self._estimate_param(stream, slot)
        return events

    def observe(self, obs: Observation, now: float) -> list[AlertEvent]:
        stream, events = self._stream(obs.agent_id, obs.variant, now)
        values = obs.values()
        for metric, slot in self._plan:
            value = values[slot]
            if value is None:
                continue
            stream.recent[slot].append(value)
            param = stream.params[slot]
            if param is None:
                continue
            event = self._step(stream, metric, slot, param, value, now=now)
            if event is not None:
                events.append(event)
        if not stream.fixed:
            self._guard(stream, values)
        return events

    # --- the reference ----------------------------------------------------------------------

    def _guard(self, stream: _Stream, values: tuple[float | None, ...]) -> None:
        """Per metric: the value waits `guard` observations, then enters the reference
        unless that metric fires (regressed traffic) or its CUSUM dates a change point
        before it."""
        size, limit = self.config.reference, self.config.guard
        refresh = False
        for metric, slot in self._plan:
            value = values[slot]
            c = stream.cusums[metric]
            if value is None or c.firing is not None:
                continue
            guard = stream.guard[slot]
            guard.append(value)
            if len(guard) <= limit:
                continue
            leaving = guard.popleft()
            if c.run >= limit:
                continue  # possibly regressed: keep the reference as it is
            column = stream.reference[slot]
            column.append(leaving)
            if len(column) >= size and (
                stream.params[slot] is None or refresh or self._due(stream)
            ):
                refresh = True
                self._estimate_param(stream, slot)

    def _due(self, stream: _Stream) -> bool:
        stream.admitted += 1
        return stream.admitted % self.config.refresh == 0

    @staticmethod
    def _admit(stream: _Stream, values: tuple[float | None, ...]) -> None:
        for slot, value in enumerate(values):
            if value is not None:
                stream.reference[slot].append(value)

    def _estimate_param(self, stream: _Stream, slot: int) -> None:
        cfg = self.config
        column = stream.reference[slot]
        needed = MIN_FIXED_REFERENCE if stream.fixed else cfg.reference
        if len(column) < needed:
            stream.params[slot] = None
            return
        if slot == 0:
            n = len(column)
            failures = math.fsum(column)
            # The null is the upper end of q0's uncertainty: a reference that happened to see
            # few failures must not make ordinary ones look like a drop. The alternative is
            # the drop from the rate actually seen.
            smoothed = (failures + 0.5) / (n + 1.0)
            q0 = min(smoothed + Q0_MARGIN_SE * math.sqrt(smoothed * (1.0 - smoothed) / n), 0.5)
            q1 = min(smoothed + cfg.pass_rate_shift, 0.99)
            fail, ok = bernoulli_llr(q0, q1)
            h = bernoulli_threshold(q0, q1, cfg.pass_rate_arl0)
            raw = failures / n
            stream.params[slot] = _Param(raw, 0.0, h, q0=q0, llr_fail=fail, llr_ok=ok)
        elif slot in _LOG_SLOTS:
            assert isinstance(column, SortedWindow)
            ordered = column.ordered
            if ordered is None:  # a NaN: only sorted() of the arrival order places it
                center, scale = robust_location_scale(list(column), _LOG_SCALE_FLOOR)
                ordered = sorted(column)
            else:
                center, scale = robust_location_scale_sorted(ordered, _LOG_SCALE_FLOOR)
            p95 = 0.0
            if slot == 8:
                p95 = math.exp(percentile_sorted(ordered, 95.0)) - LATENCY_OFFSET_MS
            stream.params[slot] = _Param(center, scale, self._h, p95=p95)
        else:
            center, scale = mean_scale(list(column), cfg.score_drop.warning / 2.0)
            stream.params[slot] = _Param(center, scale, self._h)

    # --- per metric -----------------------------------------------------------------------

    def _step_size(self, metric: str, param: _Param, value: float) -> float:
        """The regression-positive standardized step u of one observation."""
        if metric == PASS_RATE:
            return param.llr_fail if value > 0.5 else param.llr_ok
        z = (value - param.center) / param.scale
        if metric not in (COST, LATENCY_P95):
            z = -z  # a score regresses by dropping
        clip = self.config.clip
        return min(clip, max(-clip, z))

    def _step(
        self, stream: _Stream, metric: str, slot: int, param: _Param, value: float, *, now: float
    ) -> AlertEvent | None:
        c = stream.cusums[metric]
        u = self._step_size(metric, param, value)
        if c.firing is None:
            step = u if metric == PASS_RATE else u - self._k
            c.s = max(0.0, c.s + step)
            if c.s <= 0.0:
                c.run, c.shift_sum = 0, 0.0
                return None
            c.run += 1
            c.shift_sum += u
            if c.s <= param.h:
                return None
            c.s = param.h  # a crossing waits here until it is material
            if now < stream.cooldown_until.get(metric, -math.inf):
                return None
            est = self._estimate(stream, metric, slot, param, c.run)
            crossed = self.config.thresholds(metric).crossed(est.change)
            if crossed is None:
                return None
            severity, threshold = crossed
            c.firing = _Firing(severity, threshold, now, now, est.change)
            c.r = 0.0
            stream.guard[slot].clear()  # it holds the regression's first observations
            return self._event(
                AlertState.FIRING, stream, metric, est, now, f=c.firing, c=c, param=param
            )
        firing = c.firing
        c.run += 1
        c.shift_sum += u
        c.r = max(0.0, c.r + self._recovery_step(metric, param, c, value, u))
        est = self._estimate(stream, metric, slot, param, c.run)
        if c.r > param.h:
            return self._resolve(stream, metric, est, now, "recovered", c=c, param=param)
        thresholds = self.config.thresholds(metric)
        severity, threshold = _severity(thresholds, est.change, firing.severity, est.noise)
        escalated = severity is Severity.CRITICAL and firing.severity is not Severity.CRITICAL
        # A move compares two noisy estimates: three standard errors, not two.
        material = max(thresholds.warning, 1.5 * est.noise)
        moved = severity is not firing.severity or _moved(est.change, firing.last_change, material)
        due = now - firing.last_update >= self.config.update_interval_ms
        if not (escalated or (moved and due)):
            return None
        firing.severity, firing.threshold = severity, threshold
        firing.last_update, firing.last_change = now, est.change
        return self._event(AlertState.UPDATED, stream, metric, est, now, f=firing, c=c, param=param)

    @staticmethod
    def _recovery_step(metric: str, param: _Param, c: _Cusum, value: float, u: float) -> float:
        """A step of the CUSUM for a return to the baseline (drift > 0 once recovered)."""
        if metric == PASS_RATE:
            q0 = param.q0
            # The failure rate since the change point (from the mean LLR step), at most the
            # design's: a burst of failures that fired the alert early overstates it, and
            # ordinary regressed traffic would then pass for a recovery.
            q1 = min(_failure_rate(param, c.shift_sum / c.run), q0 * math.exp(param.llr_fail))
            if q1 <= q0 * 1.01:
                return math.inf  # no regression left to support
            return math.log(q0 / q1) if value > 0.5 else math.log((1.0 - q0) / (1.0 - q1))
        half = max(c.shift_sum / c.run, 0.0) / 2.0
        return half - u

    def _estimate(
        self, stream: _Stream, metric: str, slot: int, param: _Param, run: int
    ) -> _Estimate:
        recent = stream.recent[slot]
        n = min(run, len(recent))
        tail = list(recent)[len(recent) - n :] if n > 0 else list(recent)
        level = math.fsum(tail) / len(tail) if tail else param.center
        # Two standard errors of the level: a change that moves less is noise, not news.
        spread = 2.0 / math.sqrt(max(len(tail), 1))
        if metric == PASS_RATE:
            base, cur = 1.0 - param.center, 1.0 - level
            q = min(max(level, 0.5 / max(len(tail), 1)), 0.5)
            return _Estimate(base, cur, base - cur, spread * math.sqrt(q * (1.0 - q)))
        if metric in (COST, LATENCY_P95):
            if metric == COST:
                # Below the offset is rounding of a zero cost: a rise from it is unbounded.
                base, cur = _cost(param.center), _cost(level)
            else:
                base = param.p95
                cur = base * math.exp(level - param.center)
            change = delta_percent(cur, base)
            noise = 100.0 * (cur / base) * spread * param.scale if base > 0.0 else 0.0
            return _Estimate(base, cur, change, noise)
        return _Estimate(param.center, level, param.center - level, spread * param.scale)

    def _resolve(
        self,
        stream: _Stream,
        metric: str,
        est: _Estimate,
        now: float,
        reason: str,
        *,
        c: _Cusum,
        param: _Param | None,
    ) -> AlertEvent:
        firing = c.firing
        assert firing is not None
        event = self._event(
            AlertState.RESOLVED, stream, metric, est, now, f=firing, c=c, param=param, reason=reason
        )
        c.firing = None
        c.s, c.r, c.run, c.shift_sum = 0.0, 0.0, 0, 0.0
        stream.cooldown_until[metric] = now + self.config.cooldown_ms
        stream.guard[_SLOT[metric]].clear()  # the recovery's first values may be regressed
        return event

    def _event(
        self,
        state: AlertState,
        stream: _Stream,
        metric: str,
        est: _Estimate,
        now: float,
        *,
        f: _Firing,
        c: _Cusum,
        param: _Param | None,
        reason: str | None = None,
    ) -> AlertEvent:
        pct = metric in (LATENCY_P95, COST)
        # Report the signed change (current - baseline), not the regression-positive one.
        signed = est.change if pct else -est.change
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
            f"{stream.agent_id}/{stream.variant} {metric} {what}: {est.current:.4g} vs "
            f"baseline {est.baseline:.4g} ({shown}; threshold {f.threshold:g}"
            f"{' %' if pct else ''}; {TEST_CUSUM})"
        )
        slot = _SLOT[metric]
        resolved = state is AlertState.RESOLVED
        return AlertEvent(
            state=state,
            agent_id=stream.agent_id,
            variant=stream.variant,
            metric=metric,
            severity=f.severity,
            baseline_value=est.baseline,
            current_value=est.current,
            change=signed,
            change_unit="pct" if pct else "abs",
            threshold=f.threshold,
            test=TEST_CUSUM,
            p_value=None,
            interval=None,
            n_baseline=len(stream.reference[slot]),
            n_current=min(c.run, len(stream.recent[slot])),
            fired_at=f.fired_at,
            at=now,
            message=message,
            reason=reason,
            statistic=c.r if resolved else c.s,
            limit=None if param is None else param.h,
        )

    def _resolve_all(self, stream: _Stream, now: float, reason: str) -> list[AlertEvent]:
        events = []
        for metric, slot in self._plan:
            c = stream.cusums[metric]
            if c.firing is None:
                continue
            param = stream.params[slot]
            if param is None:
                est = _Estimate(math.nan, math.nan, c.firing.last_change)
            else:
                est = self._estimate(stream, metric, slot, param, c.run)
            events.append(self._resolve(stream, metric, est, now, reason, c=c, param=param))
        return events


def _severity(
    thresholds: Thresholds, change: float, current: Severity, noise: float
) -> tuple[Severity, float]:
    """The severity of a firing alert, with a dead band around the critical threshold (no
    flapping on the boundary): up to CRITICAL beyond it by the estimate's `noise`, back to
    WARNING only half a WARNING threshold (or `noise`, if more) below it."""
    critical = thresholds.critical
    if critical is None:
        return Severity.WARNING, thresholds.warning
    if current is Severity.CRITICAL:
        up = change > critical - max(thresholds.warning / 2.0, noise)
    else:
        up = change > critical + noise
    if up:
        return Severity.CRITICAL, critical
    return Severity.WARNING, thresholds.warning


def _cost(log_cost: float) -> float:
    cost = math.exp(log_cost) - COST_OFFSET_USD
    return cost if cost >= COST_OFFSET_USD / 2.0 else 0.0


def _moved(change: float, last: float, material: float) -> bool:
    """A move of at least `material` (the WARNING threshold, or the estimate's noise if
    more) and half the last reported change."""
    if math.isinf(change) or math.isinf(last):
        return change != last
    return abs(change - last) >= max(material, abs(last) / 2.0)


def _failure_rate(param: _Param, mean_step: float) -> float:
    """The failure rate q whose expected LLR step is `mean_step`: q·f + (1-q)·o = mean."""
    f, o = param.llr_fail, param.llr_ok
    q = (mean_step - o) / (f - o)
    return min(max(q, 0.0), 0.99)
