"""The dashboard JSON: flat, stable figures per run, case and category (no raw signals).

{"kind": "evalstream.eval-report", "schemaVersion": 1, "of": "dataset-run" | "comparison" |
 "matrix-run", ...}
"""

from __future__ import annotations

from typing import Any

from evalstream.assertions.evalruns.compare import Comparison
from evalstream.assertions.evalruns.matrix import MatrixResult
from evalstream.assertions.evalruns.models import CaseResult, DatasetResult
from evalstream.assertions.evalruns.summaries import by_category

JSON = Any
EVAL_REPORT = "evalstream.eval-report"


def _failed(c: CaseResult) -> list[dict[str, JSON]]:
    sample = c.representative()
    if sample is None:
        return []
    return [
        {"type": a.type, "verdict": a.verdict, "message": a.message}
        for a in sample.failed_assertions()
    ]


def dataset_summary(r: DatasetResult) -> dict[str, JSON]:
    return {
        "name": r.name,
        "runId": r.run_id,
        "target": r.target,
        "variantId": r.variant_id,
        "startedAt": r.started_at,
        "completedAt": r.completed_at,
        "durationMs": r.duration_ms,
        "interrupted": r.interrupted,
        "stoppedEarly": r.stopped_early,
        "totals": {
            "cases": r.total_cases,
            "evaluated": r.evaluated_cases,
            "passed": r.passed_cases,
            "failed": r.failed_cases,
            "errors": r.error_cases,
            "skipped": r.skipped_cases,
        },
        "passRate": r.pass_rate,
        "passMetrics": r.pass_metrics.to_json(),
        "aggregateMetrics": r.aggregate_metrics.to_json(),
        "byCategory": [
            {"category": c.category, "cases": c.cases, "passed": c.passed, "passRate": c.pass_rate}
            for c in by_category(r)
        ],
        "cases": [
            {
                "caseId": c.case_id,
                "name": c.name,
                "category": c.category,
                "tags": c.tags,
                "status": c.status,
                "skipReason": c.skip_reason,
                "samples": c.n,
                "passes": c.passes,
                "errors": c.errors,
                "passRate": c.pass_rate,
                "metrics": c.metrics.to_json() if c.metrics else None,
                "failedAssertions": _failed(c),
                "error": c.error_message(),
            }
            for c in r.cases
        ],
    }


def dataset_report(r: DatasetResult) -> dict[str, JSON]:
    return {"kind": EVAL_REPORT, "schemaVersion": 1, "of": "dataset-run", **dataset_summary(r)}


def comparison_report(c: Comparison) -> dict[str, JSON]:
    return {
        "kind": EVAL_REPORT,
        "schemaVersion": 1,
        "of": "comparison",
        "summary": c.summary.to_json(),
        "options": c.options.to_json(),
        "baseline": dataset_summary(c.baseline),
        "candidate": dataset_summary(c.candidate),
        "regressions": [r.to_json() for r in c.regressions],
        "improvements": [i.to_json() for i in c.improvements],
        "inconclusive": [i.to_json() for i in c.inconclusive],
        "unchanged": c.unchanged,
        "newCases": c.new_cases,
        "removedCases": c.removed_cases,
        "profileCheck": c.profile_check.to_json() if c.profile_check else None,
    }


def matrix_report(m: MatrixResult) -> dict[str, JSON]:
    return {
        "kind": EVAL_REPORT,
        "schemaVersion": 1,
        "of": "matrix-run",
        "name": m.name,
        "variants": [
            {
                "variantId": v.variant_id,
                "variantName": v.variant_name,
                "metadata": v.metadata,
                **dataset_summary(v.result),
            }
            for v in m.variants
        ],
        "comparison": m.comparison.to_json(),
        "recommendation": m.recommendation.to_json() if m.recommendation else None,
        "baselineVariant": m.baseline_variant,
        "comparisons": {k: comparison_report(c) for k, c in m.comparisons.items()},
    }
