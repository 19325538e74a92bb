"""Assemble case and dataset results from samples (the runner supplies times and ids)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalstream.assertions.evalruns.aggregate import (
    aggregate_metrics,
    case_status,
    dataset_pass_rate,
    mean_metrics,
    pass_metrics,
)
from evalstream.assertions.evalruns.fingerprint import dataset_fingerprint
from evalstream.assertions.evalruns.models import (
    CaseResult,
    DatasetResult,
    RunOptionsRecord,
    SampleResult,
)
from evalstream.assertions.evalruns.selection import PlannedCase, category_of
from evalstream.assertions.suite_format.suites import Suite

JSON = Any


def case_result(
    planned: PlannedCase,
    samples: Sequence[SampleResult],
    *,
    skip_reason: str | None = None,
    duration_ms: float = 0.0,
) -> CaseResult:
    case = planned.case
    reason = planned.skip_reason or (skip_reason if not samples else None)
    ordered = sorted(samples, key=lambda s: s.index)
    status = "skipped" if reason is not None else case_status(ordered)
    return CaseResult(
        case_id=case.id,
        name=case.name,
        description=case.description,
        tags=list(case.tags),
        category=category_of(case),
        status=status,
        skipped=status == "skipped",
        skip_reason=reason,
        samples=list(ordered),
        metrics=mean_metrics(ordered),
        duration_ms=duration_ms,
    )


def dataset_result(
    suite: Suite,
    cases: Sequence[CaseResult],
    *,
    run_id: str,
    options: RunOptionsRecord,
    target: str | None = None,
    variant_id: str | None = None,
    variant_name: str | None = None,
    started_at: str | None = None,
    completed_at: str | None = None,
    duration_ms: float = 0.0,
    interrupted: bool = False,
    stopped_early: str | None = None,
    metadata: dict[str, JSON] | None = None,
) -> DatasetResult:
    return DatasetResult(
        name=suite.name,
        description=suite.description,
        source=suite.source,
        dataset_fingerprint=dataset_fingerprint(suite),
        run_id=run_id,
        target=target,
        variant_id=variant_id,
        variant_name=variant_name,
        total_cases=len(cases),
        passed_cases=sum(1 for c in cases if c.status == "passed"),
        failed_cases=sum(1 for c in cases if c.status == "failed"),
        error_cases=sum(1 for c in cases if c.status == "error"),
        skipped_cases=sum(1 for c in cases if c.status == "skipped"),
        pass_rate=dataset_pass_rate(cases),
        pass_metrics=pass_metrics(cases, options.k),
        aggregate_metrics=aggregate_metrics(cases),
        cases=list(cases),
        duration_ms=duration_ms,
        started_at=started_at,
        completed_at=completed_at,
        interrupted=interrupted,
        stopped_early=stopped_early,
        options=options,
        metadata={**suite.metadata, **(metadata or {})},
    )
