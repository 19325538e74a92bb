"""Aggregates of a dataset run: case status, case metrics, pass@k / pass^k, latency and cost.

Errored samples count as errors, never as passes, and never make the latency figures look
fast: latency and token figures are taken over completed samples only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from evalstream.assertions.evalruns.models import (
    AggregateMetrics,
    CaseMetrics,
    CaseResult,
    CaseStatus,
    PassMetrics,
    SampleResult,
)
from evalstream.assertions.statistics import (
    pass_at_k,
    pass_power_k_plugin,
    pass_power_k_unbiased,
    percentile_sorted,
)


def case_status(samples: Sequence[SampleResult]) -> CaseStatus:
    """passed: every sample passed; failed: some sample failed; error: some errored, none
    failed; skipped: no sample ran."""
    if not samples:
        return "skipped"
    statuses = {s.status for s in samples}
    if "failed" in statuses:
        return "failed"
    if "error" in statuses:
        return "error"
    return "passed"


def mean_metrics(samples: Sequence[SampleResult]) -> CaseMetrics | None:
    done = [s.metrics for s in samples if s.completed and s.metrics is not None]
    if not done:
        return None
    n = len(done)
    return CaseMetrics(
        latency_ms=math.fsum(m.latency_ms for m in done) / n,
        input_tokens=math.fsum(m.input_tokens for m in done) / n,
        output_tokens=math.fsum(m.output_tokens for m in done) / n,
        total_tokens=math.fsum(m.total_tokens for m in done) / n,
        cost=math.fsum(m.cost for m in done) / n,
        activations=math.fsum(m.activations for m in done) / n,
        tool_calls=math.fsum(m.tool_calls for m in done) / n,
        llm_calls=math.fsum(m.llm_calls for m in done) / n,
        cost_complete=all(m.cost_complete for m in done),
    )


def pass_metrics(cases: Sequence[CaseResult], k: int) -> PassMetrics:
    """Means over evaluated cases of the per-case estimates (n samples, c passes)."""
    evaluated = [c for c in cases if c.samples]
    if not evaluated:
        return PassMetrics(k=k, undefined_reason="no case was evaluated")
    ns = [c.n for c in evaluated]
    n_min, n_max = min(ns), max(ns)
    at_1 = math.fsum(c.passes / c.n for c in evaluated) / len(evaluated)
    plugin = [pass_power_k_plugin(c.n, c.passes, k) for c in evaluated]
    hat_seed = math.fsum(v for v in plugin if v is not None) / len(evaluated)
    if n_min < k:
        short = sum(1 for n in ns if n < k)
        return PassMetrics(
            k=k,
            samples_per_case_min=n_min,
            samples_per_case_max=n_max,
            pass_at_1=at_1,
            pass_hat_k_seed=hat_seed,
            undefined_reason=(
                f"pass@{k} and unbiased pass^{k} are undefined: {short} case(s) have fewer "
                f"than k={k} samples (min {n_min}); run with --repeat {k} or more"
            ),
        )
    at_k = [pass_at_k(c.n, c.passes, k) for c in evaluated]
    unbiased = [pass_power_k_unbiased(c.n, c.passes, k) for c in evaluated]
    return PassMetrics(
        k=k,
        samples_per_case_min=n_min,
        samples_per_case_max=n_max,
        pass_at_1=at_1,
        pass_at_k=math.fsum(v for v in at_k if v is not None) / len(evaluated),
        pass_hat_k_seed=hat_seed,
        pass_hat_k_unbiased=math.fsum(v for v in unbiased if v is not None) / len(evaluated),
    )


def aggregate_metrics(cases: Sequence[CaseResult]) -> AggregateMetrics:
    samples = [s for c in cases if not c.skipped for s in c.samples]
    if not samples:
        return AggregateMetrics()
    measured = [s.metrics for s in samples if s.metrics is not None]
    done = [s.metrics for s in samples if s.completed and s.metrics is not None]
    total_cost = math.fsum(m.cost for m in measured)
    result = AggregateMetrics(
        samples=len(samples),
        completed_samples=len(done),
        total_cost=total_cost,
        avg_cost_per_case=total_cost / len(samples),
        total_tokens=math.fsum(m.total_tokens for m in measured),
        total_activations=math.fsum(m.activations for m in measured),
        cost_complete=all(m.cost_complete for m in measured),
    )
    if not done:
        return result
    latencies = sorted(m.latency_ms for m in done)
    return result.model_copy(
        update={
            "avg_latency_ms": math.fsum(latencies) / len(latencies),
            "min_latency_ms": latencies[0],
            "max_latency_ms": latencies[-1],
            "p50_latency_ms": percentile_sorted(latencies, 50.0),
            "p95_latency_ms": percentile_sorted(latencies, 95.0),
            "p99_latency_ms": percentile_sorted(latencies, 99.0),
            "avg_tokens_per_case": math.fsum(m.total_tokens for m in done) / len(done),
        }
    )


def dataset_pass_rate(cases: Sequence[CaseResult]) -> float:
    """Mean per-case share of passing samples over evaluated cases (0 when none ran)."""
    evaluated = [c for c in cases if c.samples]
    if not evaluated:
        return 0.0
    return math.fsum(c.passes / c.n for c in evaluated) / len(evaluated)
