"""Per-episode alert rules on the five scores (DESIGN §6), the episode-store workflow's defaults.

| dimension   | value            | WARNING    | CRITICAL   |
|-------------|------------------|------------|------------|
| cost        | Δ% vs baseline   | > 20       | > 40       |
| latency     | Δ% vs baseline   | > 30       | > 60       |
| correctness | score            | —          | < 0.5      |
| tool_match  | score            | < 0.5      | —          |
| safety      | score            | —          | < 0.8      |
| overall     | score            | —          | < 0.5      |

Every comparison is strict: a 20 % cost rise is no alert, 40 % is a WARNING, 40.0001 % is
CRITICAL; a score of exactly 0.5 is not below 0.5. An unbounded rise (a zero baseline with a
positive current) exceeds every threshold. Each dimension gives at most one alert, the most
severe that fires. A dimension that was not scored (None) raises nothing. A threshold set to
null is disabled. An episode with a CRITICAL alert does not pass (`episode_passes`); the
windowed pass rate watches its quality outcome only (`quality_passes`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, model_validator

from evalstream.assertions.errors import InputError
from evalstream.assertions.scores.dimensions import EpisodeScores

JSON = Any


class AlertConfigError(InputError):
    """Alert rules that do not validate; the message names the bad setting."""


class Severity(StrEnum):
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return 2 if self is Severity.CRITICAL else 1


class _Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    warning: float | None = None
    critical: float | None = None

    @model_validator(mode="after")
    def _finite(self) -> _Rule:
        for name in ("warning", "critical"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"`{name}` must be a finite number, got {value!r}")
        return self


class RiseRule(_Rule):
    """Alerts on a Δ% strictly above a threshold (CRITICAL's must not be below WARNING's)."""

    @model_validator(mode="after")
    def _ordered(self) -> RiseRule:
        if self.warning is not None and self.critical is not None and self.critical < self.warning:
            raise ValueError(
                f"critical ({self.critical}) must be >= warning ({self.warning}) for a rise"
            )
        return self

    def severity(self, delta_pct: float) -> tuple[Severity, float] | None:
        if self.critical is not None and delta_pct > self.critical:
            return Severity.CRITICAL, self.critical
        if self.warning is not None and delta_pct > self.warning:
            return Severity.WARNING, self.warning
        return None


class FloorRule(_Rule):
    """Alerts on a score strictly below a threshold (CRITICAL's must not be above WARNING's)."""

    @model_validator(mode="after")
    def _ordered(self) -> FloorRule:
        if self.warning is not None and self.critical is not None and self.critical > self.warning:
            raise ValueError(
                f"critical ({self.critical}) must be <= warning ({self.warning}) for a floor"
            )
        return self

    def severity(self, score: float) -> tuple[Severity, float] | None:
        if self.critical is not None and score < self.critical:
            return Severity.CRITICAL, self.critical
        if self.warning is not None and score < self.warning:
            return Severity.WARNING, self.warning
        return None


RISE_DIMENSIONS = ("cost", "latency")
FLOOR_DIMENSIONS = ("correctness", "tool_match", "safety", "overall")  # the quality dimensions


class AlertRules(BaseModel):
    """The configurable thresholds (see the module table for the defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cost: RiseRule = RiseRule(warning=20.0, critical=40.0)
    latency: RiseRule = RiseRule(warning=30.0, critical=60.0)
    correctness: FloorRule = FloorRule(critical=0.5)
    tool_match: FloorRule = FloorRule(warning=0.5)
    safety: FloorRule = FloorRule(critical=0.8)
    overall: FloorRule = FloorRule(critical=0.5)
    # Per dimension, in the order alerts are listed (cost, latency, correctness, tool match,
    # safety, overall), the value beyond which its first threshold fires: a rise's lower
    # threshold (+inf when both are off), a floor's higher one (-inf when both are off).
    _fires_beyond: tuple[float, float, float, float, float, float] = PrivateAttr(
        default=(math.inf, math.inf, -math.inf, -math.inf, -math.inf, -math.inf)
    )

    def model_post_init(self, context: Any, /) -> None:
        del context
        beyond = []
        for dim in (*RISE_DIMENSIONS, *FLOOR_DIMENSIONS):
            rule: _Rule = getattr(self, dim)
            set_ = [t for t in (rule.warning, rule.critical) if t is not None]
            if dim in RISE_DIMENSIONS:
                beyond.append(min(set_) if set_ else math.inf)
            else:
                beyond.append(max(set_) if set_ else -math.inf)
        self._fires_beyond = tuple(beyond)  # type: ignore[assignment]  # six, by construction

    @classmethod
    def load(cls, obj: Mapping[str, JSON] | None) -> AlertRules:
        """From a dict as read from YAML or JSON, merged over the defaults per threshold:
        `{"cost": {"warning": 10}}` keeps cost's CRITICAL at 40; null disables one."""
        merged: dict[str, JSON] = dict(obj or {})
        defaults = cls().model_dump()
        for dim, given in merged.items():
            if dim in defaults and isinstance(given, Mapping):
                merged[dim] = {**defaults[dim], **given}
        try:
            return cls.model_validate(merged)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '<rules>'}: {err['msg']}"
                for err in exc.errors()
            )
            raise AlertConfigError(f"invalid alert rules: {problems}") from exc

    def evaluate(self, scores: EpisodeScores) -> list[EpisodeAlert]:
        """The alerts of one scored episode, at most one per dimension (cost, latency, then
        correctness, tool match, safety, overall)."""
        # Written out: a loop over the rules' severity() costs 3-7 % more per scored episode.
        cost_at, latency_at, correctness_at, tool_match_at, safety_at, overall_at = (
            self.__pydantic_private__["_fires_beyond"]  # type: ignore[index]  # no __getattr__
        )
        alerts: list[EpisodeAlert] = []
        value = scores.cost_delta_pct
        if value is not None and value > cost_at:
            alerts.append(self._alert(scores, "cost", value))
        value = scores.latency_delta_pct
        if value is not None and value > latency_at:
            alerts.append(self._alert(scores, "latency", value))
        value = scores.correctness
        if value is not None and value < correctness_at:
            alerts.append(self._alert(scores, "correctness", value))
        value = scores.tool_match
        if value is not None and value < tool_match_at:
            alerts.append(self._alert(scores, "tool_match", value))
        value = scores.safety
        if value < safety_at:  # safety is always scored
            alerts.append(self._alert(scores, "safety", value))
        value = scores.overall
        if value is not None and value < overall_at:
            alerts.append(self._alert(scores, "overall", value))
        return alerts

    def _alert(self, scores: EpisodeScores, dim: str, value: float) -> EpisodeAlert:
        """The alert of a dimension whose value is beyond its first threshold."""
        rule: RiseRule | FloorRule = getattr(self, dim)
        fired = rule.severity(value)
        assert fired is not None  # beyond the first threshold, by the caller's comparison
        severity, threshold = fired
        return EpisodeAlert(scores.episode_id, dim, severity, value, threshold, scores.baseline)


@dataclass(frozen=True, slots=True)
class EpisodeAlert:
    """One alert of one episode. `value` is the Δ% (cost, latency; +inf when unbounded) or
    the score; `threshold` the one it crossed; `dedupe_key` is `<episode_id>/<dimension>` (the
    published record's names the episode instance: `<episode_id>@<first signal id>/<dimension>`).

    `message` is written from the fields when read: most alerts are only counted (an
    episode's pass flag, a metric), and formatting them up front cost ~12 % of scoring
    when every episode alerts.
    """

    episode_id: str
    dimension: str
    severity: Severity
    value: float
    threshold: float
    baseline: str | None = None

    @property
    def dedupe_key(self) -> str:
        return f"{self.episode_id}/{self.dimension}"

    @property
    def message(self) -> str:
        """`cost rose +50.00 % over <baseline> (> 40 %)`, `safety score 0.500 < 0.8`."""
        value, threshold = self.value, self.threshold
        if self.dimension in RISE_DIMENSIONS:
            shown = "unbounded (baseline 0)" if math.isinf(value) else f"{value:+.2f} %"
            return f"{self.dimension} rose {shown} over {self.baseline} (> {threshold:g} %)"
        return f"{self.dimension} score {value:.3f} < {threshold:g}"

    def to_json(self) -> dict[str, JSON]:
        unbounded = math.isinf(self.value)
        return {
            "dedupe_key": self.dedupe_key,
            "episode_id": self.episode_id,
            "dimension": self.dimension,
            "severity": self.severity.value,
            "value": None if unbounded else self.value,
            "unbounded": unbounded,
            "threshold": self.threshold,
            "baseline": self.baseline,
            "message": self.message,
        }


def has_critical(alerts: Iterable[EpisodeAlert]) -> bool:
    return any(a.severity is Severity.CRITICAL for a in alerts)


def episode_passes(assertions_passed: bool | None, alerts: Iterable[EpisodeAlert]) -> bool:
    """Whether an episode passes: no CRITICAL alert, and its assertions did not fail or err
    (`EpisodeResult.passed`; None — no assertion applied — does not fail it)."""
    return assertions_passed is not False and not has_critical(alerts)


def quality_passes(assertions_passed: bool | None, alerts: Iterable[EpisodeAlert]) -> bool:
    """Whether an episode's quality outcome passes, what the windowed pass rate watches: its
    assertions did not fail or err, and no CRITICAL alert on a quality dimension (correctness,
    tool match, safety, overall). A CRITICAL cost or latency alert still fails the episode
    (`episode_passes`), but cost and latency have windowed metrics of their own: counted here
    too, their noise would count twice and dilute a drop of the pass rate."""
    if assertions_passed is False:
        return False
    return not any(
        a.severity is Severity.CRITICAL and a.dimension not in RISE_DIMENSIONS for a in alerts
    )
