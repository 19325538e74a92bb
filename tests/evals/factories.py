"""Build run results directly (for compare, matrix and report tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalstream.assertions.evalruns.build import case_result, dataset_result
from evalstream.assertions.evalruns.models import (
    AssertionRecord,
    CaseMetrics,
    DatasetResult,
    RunOptionsRecord,
    SampleResult,
    SampleStatus,
)
from evalstream.assertions.evalruns.selection import PlannedCase
from evalstream.assertions.suite_format.suites import Case
from tests.evals.conftest import make_suite


def sample(
    status: SampleStatus, index: int = 0, *, latency: float = 1000.0, cost: float = 0.01
) -> SampleResult:
    verdict = {"passed": "pass", "failed": "fail", "error": "error"}[status]
    return SampleResult(
        index=index,
        episode_id=f"ep-{index}",
        status=status,
        error="boom" if status == "error" else None,
        error_kind="target" if status == "error" else None,
        metrics=None
        if status == "error"
        else CaseMetrics(latency_ms=latency, cost=cost, total_tokens=100, activations=1),
        assertions=[]
        if status == "error"
        else [
            AssertionRecord(
                index=0,
                type="output.contains",
                suite="t",
                rule="r",
                verdict=verdict,
                message=f"output check {verdict}",
            )
        ],
    )


def run_of(
    cases: Mapping[str, Sequence[SampleStatus]],
    *,
    latency: float = 1000.0,
    cost: float = 0.01,
    run_id: str = "r",
    categories: dict[str, str] | None = None,
    k: int = 3,
) -> DatasetResult:
    """`cases`: case id -> sample statuses ('passed' | 'failed' | 'error'); no statuses: the
    case is in the dataset but was not selected (skipped). The dataset is `synthetic` with
    exactly these cases."""
    built = []
    for i, (cid, statuses) in enumerate(cases.items()):
        meta = {"category": categories[cid]} if categories and cid in categories else {}
        planned = PlannedCase(i, Case(id=cid, metadata=meta))
        built.append(
            case_result(
                planned,
                [sample(s, n, latency=latency, cost=cost) for n, s in enumerate(statuses)],
                skip_reason="not among the selected case ids",
            )
        )
    repeat = max((len(s) for s in cases.values()), default=1)
    return dataset_result(
        make_suite([{"id": cid} for cid in cases]).model_copy(update={"name": "synthetic"}),
        built,
        run_id=run_id,
        options=RunOptionsRecord(repeat=repeat, k=k),
    )
