"""Five-dimension episode scores against a baseline (DESIGN §6).

Every dimension is in [0, 1], or None when it cannot be computed:

- **correctness**: the weighted share of the applicable assertions that passed (weight 1
  each unless weights are given; a weight-0 assertion does not apply; `fail`, `error` and
  `pending` count as not passed). With no applicable assertion, the episode-store workflow's rule
  against the
  baseline: the same outcome as the baseline → 1.0, `success` over a non-success baseline →
  0.8, otherwise 0; then, when both have steps, * 0.7 + 0.3 * min(steps) / max(steps).
  With neither an assertion nor a baseline outcome, the episode's own outcome: `success` →
  1.0, any other → 0.0 (a failure never passes for want of a baseline).
- **cost** and **latency**: Δ% = (current - baseline) / baseline * 100, reported signed. The
  score is 1 for Δ ≤ 0 (a cut is never penalised) and max(0, 1 - Δ / 100) above. A zero
  baseline with a positive current is an unbounded rise: Δ = +inf, score 0. Both zero is
  0 %. Δ% is rounded to 9 decimal places, so float noise never decides a boundary. Latency
  is the episode's wall-clock duration (`EpisodeMetrics.latency_ms`). Cost is None when the
  episode's cost is incomplete (a model without a price): a partial sum would hide a rise.
- **tool match**: F1 of the longest common subsequence of the tool-call name sequences,
  duplicates counted: 2 · LCS / (len(current) + len(baseline)); both empty → 1, one empty
  → 0. A retry storm (the same tool called again and again) lowers it.
- **safety**: 1 - penalties, floored at 0: per `policy:violation` by severity, per error
  signal, and once per output detector that hits (secrets and PII). Needs no baseline.
- **overall**: the weighted sum of the available dimensions, the weights renormalised over
  them. Safety and overall are rounded to 12 decimal places (sums of decimal penalties and
  weights must land exactly on a threshold such as 0.8, not a hair below). Without a
  baseline, cost, latency and tool match are None — never compared with the episode
  itself — and the record says so in `notes`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from evalstream.assertions.errors import InputError
from evalstream.assertions.evaluation.verdicts import Verdict
from evalstream.assertions.scores.checks import (
    NUMBER,
    SCORE_DECIMALS,
    ScoringConfigError,
    check_types,
)
from evalstream.assertions.scores.checks import check_number as _check_number
from evalstream.assertions.scores.checks import reject_unknown as _reject_unknown
from evalstream.assertions.scores.safety import (
    DEFAULT_DETECTORS,
    DEFAULT_SEVERITY_PENALTIES,
    VALIDATED_MATCH_LIMIT,
    VALIDATORS,
    Detector,
    SafetyConfig,
    SafetyResult,
    luhn_valid,
    safety_score,
)

if TYPE_CHECKING:  # results are read by attribute; the engine behind them is not needed
    from evalstream.assertions.evaluation.results import EpisodeResult

JSON = Any
DIMENSIONS = ("correctness", "cost", "tool_match", "latency", "safety")
# Episode outcomes, as the episode-store names the final statuses.
OUTCOMES = frozenset({"success", "failure", "timeout", "killed", "error"})
OUTCOME_ATTRS = ("outcome", "status")
SUCCESS_OVER_FAILURE = 0.8
STEP_RATIO_SHARE = 0.3
DELTA_DECIMALS = 9

# The safety names live in `evalstream.assertions.scores.safety` and are re-exported here, where
# callers have always imported them.
__all__ = [
    "DEFAULT_DETECTORS",
    "DEFAULT_SEVERITY_PENALTIES",
    "DELTA_DECIMALS",
    "DIMENSIONS",
    "OUTCOMES",
    "OUTCOME_ATTRS",
    "SCORE_DECIMALS",
    "STEP_RATIO_SHARE",
    "SUCCESS_OVER_FAILURE",
    "VALIDATED_MATCH_LIMIT",
    "VALIDATORS",
    "BaselineMismatchError",
    "Detector",
    "EpisodeScores",
    "SafetyConfig",
    "SafetyResult",
    "ScoreWeights",
    "ScoringBaseline",
    "ScoringConfig",
    "ScoringConfigError",
    "ScoringInput",
    "ScoringInputError",
    "correctness_score",
    "delta_percent",
    "delta_score",
    "lcs_length",
    "lcs_length_dp",
    "luhn_valid",
    "outcome_of",
    "safety_score",
    "score_episode",
    "tool_match_score",
]


class ScoringInputError(InputError):
    """An episode cannot be scored as given (a negative cost, an unknown outcome, …)."""


class BaselineMismatchError(InputError):
    """A baseline was used for an episode it does not describe (e.g. another agent)."""


# --- weights --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScoreWeights:
    """Relative weights of the five dimensions (the episode-store workflow's 40/20/20/10/10 by
    default).

    Each weight must be a finite number ≥ 0 and at least one must be > 0; the scores use
    them normalised to sum to 1 (so 4/2/2/1/1 means the same as the default).
    """

    correctness: float = 0.4
    cost: float = 0.2
    tool_match: float = 0.2
    latency: float = 0.1
    safety: float = 0.1
    # Normalised weights per tuple of available dimensions (a handful), filled on demand.
    _normalised: dict[tuple[str, ...], tuple[Mapping[str, float], tuple[float, ...]]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        total = 0.0
        for name in DIMENSIONS:
            total += _check_number(
                getattr(self, name), f"score weight `{name}`", ScoringConfigError
            )
        if total <= 0.0:
            raise ScoringConfigError(
                "score weights are all 0: at least one of " + ", ".join(DIMENSIONS) + " must be > 0"
            )

    @classmethod
    def from_mapping(cls, obj: Mapping[str, Any]) -> ScoreWeights:
        _reject_unknown(obj, set(DIMENSIONS), "score weight(s)")
        check_types(obj, dict.fromkeys(DIMENSIONS, NUMBER), "score weight", ScoringConfigError)
        return cls(**dict(obj))

    def as_dict(self) -> dict[str, float]:
        return {name: float(getattr(self, name)) for name in DIMENSIONS}

    def normalised(self, available: Iterable[str] = DIMENSIONS) -> dict[str, float]:
        """The weights of `available` dimensions rescaled to sum to 1 ({} if they weigh 0)."""
        return dict(_normalised(self, tuple(available))[0])


def _normalised(
    weights: ScoreWeights, available: tuple[str, ...]
) -> tuple[Mapping[str, float], tuple[float, ...]]:
    """Shared and read-only: score_episode asks this once per episode with the same few keys.
    The weights by name, and their values in the order of `available`."""
    cached = weights._normalised.get(available)
    if cached is None:
        by_name = _renormalise(weights, available)
        cached = weights._normalised[available] = (by_name, tuple(by_name.values()))
    return cached


def _renormalise(weights: ScoreWeights, available: tuple[str, ...]) -> Mapping[str, float]:
    chosen = {name: float(getattr(weights, name)) for name in available}
    total = math.fsum(chosen.values())
    if total <= 0.0:
        return MappingProxyType({})
    return MappingProxyType({name: w / total for name, w in chosen.items()})


# --- correctness ----------------------------------------------------------------------------


def correctness_score(
    verdicts: Sequence[Verdict],
    *,
    outcome: str,
    weights: Sequence[float] | None = None,
    baseline_outcome: str | None = None,
    step_count: float = 0,
    baseline_step_count: float | None = None,
) -> float | None:
    """Correctness by the rules in the module docstring."""
    if weights is not None and len(weights) != len(verdicts):
        raise ScoringInputError(
            f"{len(weights)} assertion weights given for {len(verdicts)} assertions"
        )
    total = 0.0
    passed = 0.0
    for i, verdict in enumerate(verdicts):
        w = (
            1.0
            if weights is None
            else _check_number(weights[i], f"assertion weight #{i}", ScoringInputError)
        )
        total += w
        if verdict == Verdict.PASS:
            passed += w
    if total > 0.0:
        return passed / total
    if baseline_outcome is None:
        return 1.0 if outcome == "success" else 0.0
    if outcome == baseline_outcome:
        base = 1.0
    elif outcome == "success":
        base = SUCCESS_OVER_FAILURE
    else:
        base = 0.0
    if baseline_step_count is not None and step_count > 0 and baseline_step_count > 0:
        ratio = min(step_count, baseline_step_count) / max(step_count, baseline_step_count)
        return base * (1.0 - STEP_RATIO_SHARE) + STEP_RATIO_SHARE * ratio
    return base


def _applies(inp: ScoringInput) -> bool:
    """Whether any assertion applies (weighs more than 0) to the episode."""
    if not inp.verdicts:
        return False
    return inp.assertion_weights is None or any(w > 0.0 for w in inp.assertion_weights)


# --- cost and latency -----------------------------------------------------------------------


def delta_percent(current: float, baseline: float) -> float:
    """(current - baseline) / baseline * 100; +inf for a rise from 0; 0 when both are 0.

    Rounded to DELTA_DECIMALS places: costs are decimal fractions, and 0.10 -> 0.14 must be
    exactly 40 % (a WARNING), not 40.00000000000001 % (a CRITICAL) by binary rounding.
    """
    if baseline == 0.0:
        return math.inf if current > 0.0 else 0.0
    return round((current - baseline) / baseline * 100.0, DELTA_DECIMALS)


def delta_score(delta_pct: float) -> float:
    """1 for Δ ≤ 0 (no rise), max(0, 1 - Δ / 100) above; 0 for an unbounded rise."""
    if delta_pct <= 0.0:
        return 1.0
    return max(0.0, 1.0 - delta_pct / 100.0)


# --- tool match -----------------------------------------------------------------------------


def lcs_length(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Length of the longest common subsequence, bit-parallel (Allison-Dix, Hyyrö 2004).

    Bit i of V stands for position i of the shorter sequence; per element y of the longer one,
    U = V & match[y] and V = (V + U) | (V - U). The LCS length is the number of zero bits of V
    among the low len(shorter) bits. One big-int operation per element: O(n · m / w).
    """
    # A common prefix and suffix belong to a longest common subsequence: count them and run
    # the bit-parallel pass on the rest (a swap or a retry storm leaves a few elements).
    end = min(len(a), len(b))
    head = 0
    while head < end and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < end - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    if head or tail:
        a, b = a[head : len(a) - tail], b[head : len(b) - tail]
    if len(a) < len(b):
        a, b = b, a
    m = len(b)
    if m == 0:
        return head + tail
    match: dict[Hashable, int] = {}
    for i, item in enumerate(b):
        match[item] = match.get(item, 0) | (1 << i)
    full = (1 << m) - 1
    v = full
    for item in a:
        u = v & match.get(item, 0)
        v = ((v + u) | (v - u)) & full
    return head + tail + m - v.bit_count()


def lcs_length_dp(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """The plain O(n · m) dynamic programme; the reference `lcs_length` is tested against."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def tool_match_score(current: Sequence[str], baseline: Sequence[str]) -> float:
    """F1 of the LCS: 2 · LCS / (len(current) + len(baseline)); both empty → 1."""
    if len(current) == len(baseline) and tuple(current) == tuple(baseline):
        return 1.0  # the common case in steady traffic (both empty included)
    if not current or not baseline:
        return 0.0
    return 2.0 * lcs_length(current, baseline) / (len(current) + len(baseline))


# --- configuration, input, baseline view ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScoringConfig:
    weights: ScoreWeights = field(default_factory=ScoreWeights)
    safety: SafetyConfig = field(default_factory=SafetyConfig)

    @classmethod
    def from_mapping(cls, obj: Mapping[str, Any]) -> ScoringConfig:
        """`{"weights": {...}, "safety": {...}}`, both optional."""
        _reject_unknown(obj, {"weights", "safety"}, "scoring setting(s)")
        return cls(
            weights=ScoreWeights.from_mapping(obj.get("weights", {})),
            safety=SafetyConfig.from_mapping(obj.get("safety", {})),
        )


def outcome_of(result: EpisodeResult) -> str:
    """The episode outcome, by the first rule that applies:

    1. `attrs.outcome`, else `attrs.status`, when it is a final status (success, failure,
       timeout, killed, error) — what `harness:end` or the episode-store reported;
    2. `timeout` when the episode closed as `timed_out`;
    3. `success` when it closed as `ended` (an end signal) with no error signal;
    4. `failure` otherwise (errors, `truncated`, input that ran out before an end signal).
    """
    for attr in OUTCOME_ATTRS:
        reported = result.attrs.get(attr)
        if isinstance(reported, str) and reported.lower() in OUTCOMES:
            return reported.lower()
    if result.close_reason == "timed_out":
        return "timeout"
    if result.close_reason == "ended" and result.metrics.errors == 0:
        return "success"
    return "failure"


@dataclass(frozen=True, slots=True)
class ScoringInput:
    """What scoring (and the baselines) need of one finished episode.

    `step_count` counts LLM calls, tool calls and error signals (the step types of seed
    002's store that signals identify). `tool_names` may be capped (facts keep the first
    2,048 calls); `cost_complete` is False when a model had no price.
    """

    episode_id: str
    attrs: Mapping[str, JSON] = field(default_factory=dict, hash=False)
    outcome: str = "success"
    step_count: int = 0
    cost_usd: float = 0.0
    cost_complete: bool = True
    latency_ms: float = 0.0
    tool_names: tuple[str, ...] = ()
    errors: int = 0
    policy_violations: Mapping[str, int] = field(default_factory=dict, hash=False)
    output: str | None = None
    verdicts: tuple[Verdict, ...] = ()
    assertion_weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        where = f"episode {self.episode_id!r}"
        if self.outcome not in OUTCOMES:
            raise ScoringInputError(
                f"{where}: unknown outcome {self.outcome!r}; valid: {', '.join(sorted(OUTCOMES))}"
            )
        _check_number(self.cost_usd, f"{where}: cost_usd", ScoringInputError)
        _check_number(self.latency_ms, f"{where}: latency_ms", ScoringInputError)
        for name in ("step_count", "errors"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ScoringInputError(f"{where}: {name} must be an integer >= 0, got {value!r}")
        for severity, count in self.policy_violations.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ScoringInputError(
                    f"{where}: policy violation count of {severity!r} must be an integer >= 0"
                )
        if self.assertion_weights is not None and len(self.assertion_weights) != len(self.verdicts):
            raise ScoringInputError(
                f"{where}: {len(self.assertion_weights)} assertion weights for "
                f"{len(self.verdicts)} assertions"
            )

    @classmethod
    def from_result(
        cls,
        result: EpisodeResult,
        tool_names: Sequence[str],
        *,
        outcome: str | None = None,
        assertion_weights: Sequence[float] | None = None,
    ) -> ScoringInput:
        """Build from a closed episode's result and its facts' `tool_names()`.

        `outcome` overrides the rule of `outcome_of` (e.g. a status a caller read from
        `harness:end` itself).
        """
        m = result.metrics
        return cls(
            episode_id=result.episode_id,
            attrs=dict(result.attrs),
            outcome=outcome if outcome is not None else outcome_of(result),
            step_count=m.llm_calls + m.tool_calls + m.errors,
            cost_usd=m.cost_usd,
            cost_complete=not m.unpriced_models,
            latency_ms=m.latency_ms,
            tool_names=tuple(tool_names),
            errors=m.errors,
            policy_violations=dict(m.policy_violations),
            output=result.output,
            verdicts=tuple(a.verdict for a in result.assertions),
            assertion_weights=None if assertion_weights is None else tuple(assertion_weights),
        )


class ScoringBaseline(Protocol):
    """What scoring reads of a baseline (`evalstream.assertions.scores.baselines.Baseline` is one).

    A None field is unknown: the dimension that needs it is None, with a note.
    """

    @property
    def name(self) -> str: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def latency_ms(self) -> float | None: ...
    @property
    def tool_names(self) -> tuple[str, ...] | None: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def step_count(self) -> float | None: ...

    def covers(self, attrs: Mapping[str, JSON]) -> bool:
        """Whether this baseline describes episodes with these attrs (same key)."""
        ...


# --- the record -----------------------------------------------------------------------------


def _json_number(value: float | None) -> float | None:
    return None if value is None or math.isinf(value) else value


@dataclass(frozen=True, slots=True)
class EpisodeScores:
    """The scores of one episode. `weights` are the ones actually applied (normalised over
    the dimensions that were available); `baseline` names the baseline used (None: none)."""

    episode_id: str
    correctness: float | None
    cost: float | None
    tool_match: float | None
    latency: float | None
    safety: float
    overall: float | None
    cost_delta_pct: float | None
    latency_delta_pct: float | None
    weights: Mapping[str, float] = field(hash=False)
    baseline: str | None
    safety_detail: SafetyResult
    notes: tuple[str, ...] = ()

    def dimension(self, name: str) -> float | None:
        if name not in DIMENSIONS and name != "overall":
            raise KeyError(name)
        value: float | None = getattr(self, name)
        return value

    def dimensions(self) -> dict[str, float | None]:
        return {name: self.dimension(name) for name in DIMENSIONS}

    def to_json(self) -> dict[str, JSON]:
        """JSON-safe: an unbounded Δ% is null with `*_rise_unbounded: true`."""
        return {
            "episode_id": self.episode_id,
            "baseline": self.baseline,
            "overall": self.overall,
            "correctness": self.correctness,
            "cost": self.cost,
            "tool_match": self.tool_match,
            "latency": self.latency,
            "safety": self.safety,
            "cost_delta_pct": _json_number(self.cost_delta_pct),
            "cost_rise_unbounded": self.cost_delta_pct == math.inf,
            "latency_delta_pct": _json_number(self.latency_delta_pct),
            "latency_rise_unbounded": self.latency_delta_pct == math.inf,
            "weights": dict(self.weights),
            "safety_detail": self.safety_detail.to_json(),
            "notes": list(self.notes),
        }


@functools.cache
def _default_config() -> ScoringConfig:
    return ScoringConfig()


def score_episode(
    inp: ScoringInput,
    baseline: ScoringBaseline | None,
    config: ScoringConfig | None = None,
) -> EpisodeScores:
    """Score one episode against its baseline (None: no baseline; see the module doc).

    Raises BaselineMismatchError when the baseline does not cover the episode's key.
    """
    cfg = config if config is not None else _default_config()
    notes: list[str] = []
    if baseline is None:
        notes.append("no baseline: cost, latency and tool match not scored")
        baseline_outcome = baseline_steps = None
    else:
        if not baseline.covers(inp.attrs):
            raise BaselineMismatchError(
                f"baseline {baseline.name} does not describe episode {inp.episode_id!r}"
            )
        baseline_outcome, baseline_steps = baseline.outcome, baseline.step_count

    correctness = correctness_score(
        inp.verdicts,
        weights=inp.assertion_weights,
        outcome=inp.outcome,
        baseline_outcome=baseline_outcome,
        step_count=inp.step_count,
        baseline_step_count=baseline_steps,
    )
    if baseline_outcome is None and correctness is not None and not _applies(inp):
        notes.append(
            f"no applicable assertion and no baseline outcome: correctness from the "
            f"episode's own outcome ({inp.outcome})"
        )

    cost = cost_delta = latency = latency_delta = tool_match = None
    if baseline is not None:
        if not inp.cost_complete:
            notes.append("cost incomplete (a model without a price): cost not scored")
        elif (base_cost := baseline.cost_usd) is None:
            notes.append("baseline has no cost: cost not scored")
        else:
            cost_delta = delta_percent(inp.cost_usd, base_cost)
            cost = delta_score(cost_delta)
        if (base_latency := baseline.latency_ms) is None:
            notes.append("baseline has no latency: latency not scored")
        else:
            latency_delta = delta_percent(inp.latency_ms, base_latency)
            latency = delta_score(latency_delta)
        if (base_tools := baseline.tool_names) is None:
            notes.append("baseline has no tool sequence: tool match not scored")
        else:
            tool_match = tool_match_score(inp.tool_names, base_tools)

    safety = safety_score(inp.policy_violations, inp.errors, inp.output, cfg.safety)
    overall: float | None = None
    if (
        correctness is not None
        and cost is not None
        and tool_match is not None
        and latency is not None
    ):
        # Every dimension scored (the common case): the weights apply as configured.
        weights, (w_correct, w_cost, w_tools, w_latency, w_safety) = _normalised(
            cfg.weights, DIMENSIONS
        )
        weighted = math.fsum(
            (
                w_correct * correctness,
                w_cost * cost,
                w_tools * tool_match,
                w_latency * latency,
                w_safety * safety.score,
            )
        )
        overall = min(1.0, round(weighted, SCORE_DECIMALS))
    else:
        values = (correctness, cost, tool_match, latency, safety.score)  # in DIMENSIONS order
        available = tuple(
            [name for name, v in zip(DIMENSIONS, values, strict=True) if v is not None]
        )
        present = [v for v in values if v is not None]
        notes.append("overall over " + ", ".join(available) + " with renormalised weights")
        weights, shares = _normalised(cfg.weights, available)
        if weights:
            # Same order as `available`, so zip pairs each weight with its value.
            weighted = math.fsum([w * v for w, v in zip(shares, present, strict=True)])
            overall = min(1.0, round(weighted, SCORE_DECIMALS))
        else:
            notes.append("the available dimensions all weigh 0: overall not scored")
    return EpisodeScores(
        inp.episode_id,
        correctness,
        cost,
        tool_match,
        latency,
        safety.score,
        overall,
        cost_delta,
        latency_delta,
        weights,
        None if baseline is None else baseline.name,
        safety,
        tuple(notes) if notes else (),
    )
