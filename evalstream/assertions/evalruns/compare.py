"""compare(baseline, candidate): the signal-native spec's Comparison, and the CI gate built on it.

Rules (the defaults are the signal-native spec's CompareOptions):

- A case is compared when both runs evaluated it. With one sample on each side, passed →
  not passed is a `pass_to_fail` regression (critical unless `critical_on_pass_to_fail` is
  off) and the reverse a `fail_to_pass` improvement. With repeats on either side, a change of
  pass rate counts only with statistical support: Newcombe's interval for
  p_candidate - p_baseline at `confidence` must exclude 0 and the change must reach
  `pass_rate_threshold`; a change without support is listed as `inconclusive`, never as a
  regression. One unlucky sample does not block a merge.
- A case's mean latency or cost degrades (`metric_degraded`, severity warning) when it rises
  by more than `latency_threshold` / `cost_threshold` (relative) and by more than
  `min_latency_delta_ms` / `min_cost_delta` (absolute, so microsecond jitter of a fast agent
  is not a 40 % regression); with 2+ completed samples on both sides Welch's t-test must also
  reject equality at `confidence`. A baseline of 0 and a candidate above 0 is an unbounded
  rise, never 0 %.
- Dataset level: the pass rate over the cases both runs evaluated, pooled over samples, falls
  significantly (Newcombe) by at least `pass_rate_threshold` → a critical block reason.
- verdict: `worse` if there are regressions or a significant drop, `better` if there are
  improvements or a significant rise (or latency/cost fall past their thresholds),
  `mixed` if both, else `equivalent`.
- shouldBlock (fail_on=critical): any critical regression, a significant pass-rate drop, a
  failed threshold profile, or baseline cases the candidate did not evaluate (skipped, not
  selected, cut short) unless `allow_removed` — a gate must not pass on the cases it never
  ran. fail_on=warning blocks on warnings too (metric degradations, dataset latency or cost
  over threshold).
- Runs of different datasets are not compared at all: `DatasetMismatchError` names both
  datasets and how their cases differ (by the dataset name and the fingerprint of the cases'
  ids and inputs; records without a fingerprint, of older versions, by their case ids).
"""

from __future__ import annotations

import math
from typing import Final, Literal

from pydantic import Field

from evalstream.assertions.errors import InputError
from evalstream.assertions.evalruns.models import (
    AssertionRecord,
    CaseResult,
    DatasetResult,
    Model,
)
from evalstream.assertions.evalruns.profiles import ProfileCheck
from evalstream.assertions.statistics import newcombe_interval, welch_t_test

COMPARISON: Final = "evalstream.comparison"
FailOn = Literal["critical", "warning"]
Severity = Literal["critical", "warning"]
Verdict = Literal["better", "worse", "equivalent", "mixed"]


class CompareOptions(Model):
    pass_rate_threshold: float = 0.05
    latency_threshold: float = 0.10
    cost_threshold: float = 0.10
    critical_on_pass_to_fail: bool = True
    confidence: float = 0.95
    min_latency_delta_ms: float = 50.0
    min_cost_delta: float = 0.0
    fail_on: FailOn = "critical"
    allow_removed: bool = False


class DatasetMismatchError(InputError):
    """The two runs ran different datasets: their results say nothing about each other."""


class Side(Model):
    passed: bool
    value: float | None = None


class Regression(Model):
    case_id: str
    case_name: str | None = None
    type: Literal["pass_to_fail", "metric_degraded"]
    description: str
    baseline: Side
    candidate: Side
    delta: float | None = None
    severity: Severity
    failed_assertions: list[AssertionRecord] = Field(default_factory=list)
    evidence: str | None = None


class Improvement(Model):
    case_id: str
    case_name: str | None = None
    type: Literal["fail_to_pass", "metric_improved"]
    description: str
    baseline: Side
    candidate: Side
    delta: float | None = None
    evidence: str | None = None


class Inconclusive(Model):
    case_id: str
    description: str


class ComparisonSummary(Model):
    pass_rate_delta: float
    avg_latency_delta_ms: float | None
    avg_latency_delta_pct: float | None
    cost_delta: float | None
    cost_delta_pct: float | None
    verdict: Verdict
    should_block: bool
    block_reason: str | None = None
    block_reasons: list[str] = Field(default_factory=list)
    fail_on: FailOn = "critical"


class Comparison(Model):
    kind: Literal["evalstream.comparison"] = COMPARISON
    schema_version: int = 1
    options: CompareOptions
    baseline: DatasetResult
    candidate: DatasetResult
    regressions: list[Regression]
    improvements: list[Improvement]
    unchanged: list[str]
    new_cases: list[str]
    removed_cases: list[str]
    inconclusive: list[Inconclusive] = Field(default_factory=list)
    profile_check: ProfileCheck | None = None
    summary: ComparisonSummary


def _ids(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" (+{len(ids) - limit} more)" if len(ids) > limit else "")


def check_same_dataset(baseline: DatasetResult, candidate: DatasetResult) -> None:
    """Raise DatasetMismatchError unless both runs ran the same dataset (module docstring)."""
    base_ids = [c.case_id for c in baseline.cases]
    cand_ids = [c.case_id for c in candidate.cases]
    problems: list[str] = []
    if baseline.name != candidate.name:
        problems.append(f"dataset {baseline.name!r} vs {candidate.name!r}")
    only_base = [i for i in base_ids if i not in set(cand_ids)]
    only_cand = [i for i in cand_ids if i not in set(base_ids)]
    if only_base:
        problems.append(f"cases only in the baseline: {_ids(only_base)}")
    if only_cand:
        problems.append(f"cases only in the candidate: {_ids(only_cand)}")
    fb, fc = baseline.dataset_fingerprint, candidate.dataset_fingerprint
    if fb is not None and fc is not None and fb != fc and not (only_base or only_cand):
        problems.append(f"the same case ids with other inputs (fingerprint {fb} vs {fc})")
    if problems:
        raise DatasetMismatchError(
            f"the baseline and the candidate ran different datasets: {'; '.join(problems)}. "
            "A comparison needs two runs of the same dataset: run the baseline again on this "
            "dataset (cases left out by --case or --tag are fine: they are still listed)"
        )


def _evaluated(result: DatasetResult) -> dict[str, CaseResult]:
    return {c.case_id: c for c in result.cases if not c.skipped and c.samples}


def _pct(base: float, cand: float) -> float:
    delta = cand - base
    if base > 0:
        return delta / base
    return math.inf if delta > 0 else (-math.inf if delta < 0 else 0.0)


def _fmt_pct(pct: float) -> str:
    return "+∞ %" if math.isinf(pct) else f"{pct * 100:+.1f} %"


def _rate(c: CaseResult) -> str:
    return f"{c.passes}/{c.n}"


def _first_failure(c: CaseResult) -> str:
    sample = c.representative()
    if sample is None:
        return c.status
    if sample.status == "error":
        return f"error: {sample.error}"
    failed = sample.failed_assertions()
    if not failed:
        return sample.status
    first = failed[0]
    more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{first.type} {first.verdict}: {first.message}{more}"


def _significant(samples_a: list[float], samples_b: list[float], confidence: float) -> bool:
    """Welch's test when both sides have 2+ values; with fewer there is nothing to test and
    the thresholds alone decide."""
    if len(samples_a) < 2 or len(samples_b) < 2:
        return True
    return welch_t_test(samples_a, samples_b).p_value < 1.0 - confidence


def _metric_values(c: CaseResult, metric: str) -> list[float]:
    return [getattr(s.metrics, metric) for s in c.samples if s.completed and s.metrics is not None]


class _CaseDiff:
    def __init__(self, options: CompareOptions) -> None:
        self.o = options
        self.regressions: list[Regression] = []
        self.improvements: list[Improvement] = []
        self.inconclusive: list[Inconclusive] = []

    def outcome(self, b: CaseResult, c: CaseResult) -> None:
        o = self.o
        severity: Severity = "critical" if o.critical_on_pass_to_fail else "warning"
        name = c.name or b.name
        if b.n == 1 and c.n == 1:
            if b.passed and not c.passed:
                self.regressions.append(
                    Regression(
                        case_id=c.case_id,
                        case_name=name,
                        type="pass_to_fail",
                        description=f"passed in baseline, {c.status} in candidate: "
                        f"{_first_failure(c)}",
                        baseline=Side(passed=True, value=1.0),
                        candidate=Side(passed=False, value=0.0),
                        delta=-1.0,
                        severity=severity,
                        failed_assertions=_failed(c),
                    )
                )
            elif c.passed and not b.passed:
                self.improvements.append(
                    Improvement(
                        case_id=c.case_id,
                        case_name=name,
                        type="fail_to_pass",
                        description=f"{b.status} in baseline, passed in candidate",
                        baseline=Side(passed=False, value=0.0),
                        candidate=Side(passed=True, value=1.0),
                        delta=1.0,
                    )
                )
            return
        pb, pc = b.passes / b.n, c.passes / c.n
        delta = pc - pb
        if delta == 0:
            return
        ci = newcombe_interval(c.passes, c.n, b.passes, b.n, o.confidence)
        evidence = (
            f"pass rate {_rate(b)} → {_rate(c)} (Δ {delta:+.2f}; "
            f"{o.confidence:.0%} CI [{ci.low:+.2f}, {ci.high:+.2f}])"
        )
        if ci.high < 0 and -delta >= o.pass_rate_threshold:
            self.regressions.append(
                Regression(
                    case_id=c.case_id,
                    case_name=name,
                    type="pass_to_fail",
                    description=f"{evidence}: {_first_failure(c)}",
                    baseline=Side(passed=b.passed, value=pb),
                    candidate=Side(passed=c.passed, value=pc),
                    delta=delta,
                    severity=severity,
                    failed_assertions=_failed(c),
                    evidence=evidence,
                )
            )
        elif ci.low > 0 and delta >= o.pass_rate_threshold:
            self.improvements.append(
                Improvement(
                    case_id=c.case_id,
                    case_name=name,
                    type="fail_to_pass",
                    description=evidence,
                    baseline=Side(passed=b.passed, value=pb),
                    candidate=Side(passed=c.passed, value=pc),
                    delta=delta,
                    evidence=evidence,
                )
            )
        else:
            self.inconclusive.append(
                Inconclusive(
                    case_id=c.case_id,
                    description=f"{evidence}: the interval includes 0 or the change is below "
                    f"the {o.pass_rate_threshold:g} threshold; not a regression without more "
                    "samples",
                )
            )

    def metric(self, b: CaseResult, c: CaseResult, metric: str, label: str) -> None:
        if b.metrics is None or c.metrics is None:
            return
        o = self.o
        if metric == "latency_ms":
            rel, floor, unit = o.latency_threshold, o.min_latency_delta_ms, "ms"
        else:
            rel, floor, unit = o.cost_threshold, o.min_cost_delta, "USD"
        base, cand = getattr(b.metrics, metric), getattr(c.metrics, metric)
        delta = cand - base
        pct = _pct(base, cand)
        if abs(delta) <= floor or abs(pct) <= rel:
            return
        if not _significant(_metric_values(c, metric), _metric_values(b, metric), o.confidence):
            return
        shown = f"{label} {base:.6g} → {cand:.6g} {unit} ({_fmt_pct(pct)})"
        if delta > 0:
            self.regressions.append(
                Regression(
                    case_id=c.case_id,
                    case_name=c.name or b.name,
                    type="metric_degraded",
                    description=shown,
                    baseline=Side(passed=b.passed, value=base),
                    candidate=Side(passed=c.passed, value=cand),
                    delta=delta,
                    severity="warning",
                )
            )
        else:
            self.improvements.append(
                Improvement(
                    case_id=c.case_id,
                    case_name=c.name or b.name,
                    type="metric_improved",
                    description=shown,
                    baseline=Side(passed=b.passed, value=base),
                    candidate=Side(passed=c.passed, value=cand),
                    delta=delta,
                )
            )


def _failed(c: CaseResult) -> list[AssertionRecord]:
    sample = c.representative()
    return sample.failed_assertions() if sample is not None else []


def compare(
    baseline: DatasetResult,
    candidate: DatasetResult,
    options: CompareOptions | None = None,
    *,
    profile_check: ProfileCheck | None = None,
) -> Comparison:
    o = options or CompareOptions()
    check_same_dataset(baseline, candidate)
    base_cases, cand_cases = _evaluated(baseline), _evaluated(candidate)
    diff = _CaseDiff(o)
    common = [cid for cid in cand_cases if cid in base_cases]
    for cid in common:
        b, c = base_cases[cid], cand_cases[cid]
        diff.outcome(b, c)
        diff.metric(b, c, "latency_ms", "latency")
        diff.metric(b, c, "cost", "cost")
    touched = (
        {r.case_id for r in diff.regressions}
        | {i.case_id for i in diff.improvements}
        | {i.case_id for i in diff.inconclusive}
    )
    removed = [cid for cid in base_cases if cid not in cand_cases]
    summary = _summary(
        baseline=baseline,
        candidate=candidate,
        common=common,
        removed=removed,
        base_cases=base_cases,
        cand_cases=cand_cases,
        diff=diff,
        o=o,
        profile_check=profile_check,
    )
    return Comparison(
        options=o,
        baseline=baseline.without_signals(),
        candidate=candidate.without_signals(),
        regressions=diff.regressions,
        improvements=diff.improvements,
        unchanged=[cid for cid in common if cid not in touched],
        new_cases=[cid for cid in cand_cases if cid not in base_cases],
        removed_cases=removed,
        inconclusive=diff.inconclusive,
        profile_check=profile_check,
        summary=summary,
    )


def _summary(
    *,
    baseline: DatasetResult,
    candidate: DatasetResult,
    common: list[str],
    removed: list[str],
    base_cases: dict[str, CaseResult],
    cand_cases: dict[str, CaseResult],
    diff: _CaseDiff,
    o: CompareOptions,
    profile_check: ProfileCheck | None,
) -> ComparisonSummary:
    ba, ca = baseline.aggregate_metrics, candidate.aggregate_metrics
    lat_ms = lat_pct = cost_d = cost_pct = None
    if ba.avg_latency_ms is not None and ca.avg_latency_ms is not None:
        lat_ms = ca.avg_latency_ms - ba.avg_latency_ms
        lat_pct = _pct(ba.avg_latency_ms, ca.avg_latency_ms)
    if ba.avg_cost_per_case is not None and ca.avg_cost_per_case is not None:
        cost_d = ca.avg_cost_per_case - ba.avg_cost_per_case
        cost_pct = _pct(ba.avg_cost_per_case, ca.avg_cost_per_case)

    critical: list[str] = []
    warnings: list[str] = []
    bad = good = False

    crit = [r for r in diff.regressions if r.severity == "critical"]
    warn = [r for r in diff.regressions if r.severity == "warning"]
    if crit:
        critical.append(
            f"{len(crit)} critical regression(s): "
            + "; ".join(f"{r.case_id} ({r.description})" for r in crit)
        )
    if warn:
        warnings.append(
            f"{len(warn)} warning regression(s): "
            + "; ".join(f"{r.case_id} ({r.description})" for r in warn)
        )
    bad = bool(diff.regressions)
    good = bool(diff.improvements)

    # Pass rate over the common cases, pooled over samples.
    bp = sum(base_cases[c].passes for c in common)
    bn = sum(base_cases[c].n for c in common)
    cp = sum(cand_cases[c].passes for c in common)
    cn = sum(cand_cases[c].n for c in common)
    if bn and cn:
        ci = newcombe_interval(cp, cn, bp, bn, o.confidence)
        d = cp / cn - bp / bn
        shown = (
            f"pass rate on the {len(common)} common case(s) {bp}/{bn} → {cp}/{cn} "
            f"(Δ {d:+.2f}; {o.confidence:.0%} CI [{ci.low:+.2f}, {ci.high:+.2f}])"
        )
        if ci.high < 0 and -d >= o.pass_rate_threshold:
            critical.append(f"{shown} fell significantly")
            bad = True
        elif ci.low > 0 and d >= o.pass_rate_threshold:
            good = True

    floor_ok = lat_ms is not None and abs(lat_ms) > o.min_latency_delta_ms
    if lat_pct is not None and floor_ok and lat_pct > o.latency_threshold:
        warnings.append(f"average latency {_fmt_pct(lat_pct)} (+{lat_ms:.0f} ms)")
        bad = True
    elif lat_pct is not None and floor_ok and lat_pct < -o.latency_threshold:
        good = True
    cost_ok = cost_d is not None and abs(cost_d) > o.min_cost_delta
    if cost_pct is not None and cost_ok and cost_pct > o.cost_threshold:
        warnings.append(f"average cost per case {_fmt_pct(cost_pct)} (+${cost_d:.6f})")
        bad = True
    elif cost_pct is not None and cost_ok and cost_pct < -o.cost_threshold:
        good = True

    if removed and not o.allow_removed:
        critical.append(
            f"{len(removed)} of the baseline's {len(base_cases)} evaluated case(s) were not "
            f"evaluated in the candidate ({_ids(removed)}): the gate cannot vouch for cases it "
            "did not run; run them, or pass --allow-removed if leaving them out is intended"
        )

    if profile_check is not None and not profile_check.passed:
        critical.append(
            f"threshold profile {profile_check.profile!r} not met: "
            f"{profile_check.describe_failures()}"
        )

    verdict: Verdict = (
        "mixed" if bad and good else "worse" if bad else "better" if good else "equivalent"
    )
    reasons = critical + (warnings if o.fail_on == "warning" else [])
    return ComparisonSummary(
        pass_rate_delta=candidate.pass_rate - baseline.pass_rate,
        avg_latency_delta_ms=lat_ms,
        avg_latency_delta_pct=_finite(lat_pct),
        cost_delta=cost_d,
        cost_delta_pct=_finite(cost_pct),
        verdict=verdict,
        should_block=bool(reasons),
        block_reason="; ".join(reasons) if reasons else None,
        block_reasons=reasons,
        fail_on=o.fail_on,
    )


def _finite(value: float | None) -> float | None:
    """JSON has no infinity: an unbounded relative change is reported as None (the absolute
    delta beside it says which way)."""
    if value is None or math.isinf(value):
        return None
    return value
