"""runMatrix's pure half: rank variants, find the Pareto frontier, recommend one.

- byPassRate: highest pass rate first (ties: cheaper, then faster); byCost: lowest average
  cost per case first; byLatency: lowest average latency first. A variant without the figure
  (nothing completed) sorts last.
- paretoFrontier: variants no other variant dominates on (pass rate ↑, cost ↓, latency ↓):
  as good on all three and clearly better on one. Cost and latency differences within
  compare()'s default thresholds (10 %, and 50 ms for latency) count as ties, so timing
  jitter of a fast agent does not put a worse variant on the frontier.
- recommendation: the frontier variant with the highest pass rate, ties broken by cost then
  latency. Confidence: `high` when its pass rate beats every other variant's with
  statistical support (Newcombe's interval of the difference excludes 0) or it is at least as
  good as every other on all three; `medium` when it leads on pass rate without support;
  `low` when it shares the top pass rate with another variant or a run has fewer than 10
  samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from pydantic import Field

from evalstream.assertions.evalruns.compare import Comparison
from evalstream.assertions.evalruns.models import DatasetResult, Model
from evalstream.assertions.statistics import newcombe_interval

JSON = Any
MATRIX_RUN: Final = "evalstream.matrix-run"
MIN_SAMPLES_FOR_CONFIDENCE = 10


class VariantResult(Model):
    variant_id: str
    variant_name: str
    result: DatasetResult
    metadata: dict[str, JSON] = Field(default_factory=dict)


class VariantComparison(Model):
    by_pass_rate: list[str]
    by_cost: list[str]
    by_latency: list[str]
    pareto_frontier: list[str]


class VariantRecommendation(Model):
    variant_id: str
    reason: str
    tradeoffs: list[str] = Field(default_factory=list)
    confidence: Literal["high", "medium", "low"]


class MatrixResult(Model):
    kind: Literal["evalstream.matrix-run"] = MATRIX_RUN
    schema_version: int = 1
    name: str
    variants: list[VariantResult]
    comparison: VariantComparison
    recommendation: VariantRecommendation | None = None
    baseline_variant: str | None = None
    comparisons: dict[str, Comparison] = Field(default_factory=dict)
    duration_ms: float = 0.0
    started_at: str | None = None
    completed_at: str | None = None
    interrupted: bool = False


_INF = float("inf")


def _cost(v: VariantResult) -> float:
    c = v.result.aggregate_metrics.avg_cost_per_case
    return _INF if c is None else c


def _latency(v: VariantResult) -> float:
    x = v.result.aggregate_metrics.avg_latency_ms
    return _INF if x is None else x


RELATIVE_TIE = 0.10
LATENCY_TIE_MS = 50.0


def _order(x: float, y: float, *, floor: float = 0.0) -> int:
    """-1 when x is clearly lower than y, 1 when clearly higher, 0 for a tie."""
    if x == y:
        return 0
    if _INF in (x, y):
        return -1 if x < y else 1
    gap = abs(x - y)
    if gap <= floor or gap <= RELATIVE_TIE * min(abs(x), abs(y)):
        return 0
    return -1 if x < y else 1


def _dominates(a: VariantResult, b: VariantResult) -> bool:
    rate = (a.result.pass_rate > b.result.pass_rate) - (a.result.pass_rate < b.result.pass_rate)
    cost = -_order(_cost(a), _cost(b))
    latency = -_order(_latency(a), _latency(b), floor=LATENCY_TIE_MS)
    return min(rate, cost, latency) >= 0 and max(rate, cost, latency) > 0


def _pooled(v: VariantResult) -> tuple[int, int]:
    cases = [c for c in v.result.cases if c.samples]
    return sum(c.passes for c in cases), sum(c.n for c in cases)


def rank_variants(variants: Sequence[VariantResult]) -> VariantComparison:
    by_rate = sorted(variants, key=lambda v: (-v.result.pass_rate, _cost(v), _latency(v)))
    frontier = [v for v in variants if not any(_dominates(o, v) for o in variants if o is not v)]
    return VariantComparison(
        by_pass_rate=[v.variant_id for v in by_rate],
        by_cost=[v.variant_id for v in sorted(variants, key=_cost)],
        by_latency=[v.variant_id for v in sorted(variants, key=_latency)],
        pareto_frontier=[v.variant_id for v in frontier],
    )


def recommend(
    variants: Sequence[VariantResult], ranking: VariantComparison, confidence: float = 0.95
) -> VariantRecommendation | None:
    if not variants:
        return None
    by_id = {v.variant_id: v for v in variants}
    frontier = [by_id[i] for i in ranking.pareto_frontier]
    best = min(frontier, key=lambda v: (-v.result.pass_rate, _cost(v), _latency(v)))
    others = [v for v in variants if v is not best]
    rate = best.result.pass_rate
    reason = f"highest pass rate ({rate:.0%}) on the efficiency frontier"
    tradeoffs: list[str] = []
    cheapest = min(variants, key=_cost)
    fastest = min(variants, key=_latency)
    if cheapest is not best and _order(_cost(cheapest), _cost(best)) < 0:
        tradeoffs.append(
            f"{cheapest.variant_id} is cheaper ({_cost(cheapest):.6f} vs {_cost(best):.6f} "
            f"USD per case) at pass rate {cheapest.result.pass_rate:.0%}"
        )
    if fastest is not best and _order(_latency(fastest), _latency(best), floor=LATENCY_TIE_MS) < 0:
        tradeoffs.append(
            f"{fastest.variant_id} is faster ({_latency(fastest):.0f} vs "
            f"{_latency(best):.0f} ms) at pass rate {fastest.result.pass_rate:.0%}"
        )
    if not others:
        return VariantRecommendation(
            variant_id=best.variant_id,
            reason="the only variant",
            confidence="low",
        )
    tied = [v for v in others if v.result.pass_rate == rate]
    bp, bn = _pooled(best)
    few = bn < MIN_SAMPLES_FOR_CONFIDENCE or any(
        _pooled(v)[1] < MIN_SAMPLES_FOR_CONFIDENCE for v in others
    )
    supported = all(
        _pooled(v)[1] > 0 and newcombe_interval(bp, bn, *_pooled(v), confidence).low > 0
        for v in others
    )
    dominates_all = all(_dominates(best, v) or _equal(best, v) for v in others)
    level: Literal["high", "medium", "low"]
    if tied and not dominates_all:
        level = "low"
        reason += f"; ties on pass rate with {', '.join(v.variant_id for v in tied)}"
    elif few:
        level = "low"
        reason += f"; fewer than {MIN_SAMPLES_FOR_CONFIDENCE} samples in a run"
    elif supported or dominates_all:
        level = "high"
        reason += "; " + (
            "as good or better than every other variant on pass rate, cost and latency"
            if dominates_all
            else f"its pass rate beats every other variant's at {confidence:.0%} confidence"
        )
    else:
        level = "medium"
        reason += f"; its lead on pass rate is not significant at {confidence:.0%}"
    return VariantRecommendation(
        variant_id=best.variant_id, reason=reason, tradeoffs=tradeoffs, confidence=level
    )


def _equal(a: VariantResult, b: VariantResult) -> bool:
    return (
        a.result.pass_rate == b.result.pass_rate
        and _order(_cost(a), _cost(b)) == 0
        and _order(_latency(a), _latency(b), floor=LATENCY_TIE_MS) == 0
    )


def matrix_result(
    name: str,
    variants: Sequence[VariantResult],
    *,
    baseline_variant: str | None = None,
    comparisons: dict[str, Comparison] | None = None,
    duration_ms: float = 0.0,
    started_at: str | None = None,
    completed_at: str | None = None,
    interrupted: bool = False,
) -> MatrixResult:
    ranking = rank_variants(variants)
    return MatrixResult(
        name=name,
        variants=list(variants),
        comparison=ranking,
        recommendation=recommend(variants, ranking),
        baseline_variant=baseline_variant,
        comparisons=comparisons or {},
        duration_ms=duration_ms,
        started_at=started_at,
        completed_at=completed_at,
        interrupted=interrupted,
    )
