"""Figures every report shows, computed once: per-category pass rates, formatted metrics."""

from __future__ import annotations

import math
from dataclasses import dataclass

from evalstream.assertions.evalruns.models import CaseResult, DatasetResult, PassMetrics

UNCATEGORISED = "(none)"


@dataclass(frozen=True)
class CategoryRow:
    category: str
    cases: int
    passed: int
    pass_rate: float


def by_category(result: DatasetResult) -> list[CategoryRow]:
    groups: dict[str, list[CaseResult]] = {}
    for case in result.cases:
        if case.samples:
            groups.setdefault(case.category or UNCATEGORISED, []).append(case)
    return [
        CategoryRow(
            category=name,
            cases=len(cases),
            passed=sum(1 for c in cases if c.passed),
            pass_rate=math.fsum(c.passes / c.n for c in cases) / len(cases),
        )
        for name, cases in sorted(groups.items())
    ]


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def usd(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.6f}"


def signed_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f}%"


def pass_metric_rows(pm: PassMetrics) -> list[tuple[str, str, str]]:
    """(label, value, definition) for pass@1, pass@k and both pass^k, undefined ones said so."""
    k = pm.k
    undefined = "undefined (n < k)"
    return [
        ("pass@1", pct(pm.pass_at_1), "mean share of passing samples per case"),
        (
            f"pass@{k}",
            pct(pm.pass_at_k) if pm.pass_at_k is not None else undefined,
            "unbiased 1 - C(n-c,k)/C(n,k)",
        ),
        (
            f"pass^{k} (eval-harness)",
            pct(pm.pass_hat_k_seed),
            "(c/n)^k, the eval-harness definition",
        ),
        (
            f"pass^{k} (unbiased)",
            pct(pm.pass_hat_k_unbiased) if pm.pass_hat_k_unbiased is not None else undefined,
            "C(c,k)/C(n,k)",
        ),
    ]


def status_mark(status: str) -> str:
    return {"passed": "✅", "failed": "❌", "error": "⚠️", "skipped": "⏭️"}.get(status, status)
