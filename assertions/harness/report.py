"""The eval-harness eval report: metadata, summary (by category, by grader), metrics, failures and
recommendations; as JSON (the seed's `eval_report` shape) and Markdown.

`by_category` groups by eval type (capability / regression), as the seed's sample does;
`by_topic` groups by the eval's own `category` (e.g. `code_generation`).
Metrics over the attempts of every graded item: pass@1 is the mean of c/n; pass@k the mean of
the unbiased estimator 1 - C(n-c, k) / C(n, k) over items with n >= k; pass^k the mean of the
seed's (c/n)^k. A metric no item can support is null.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from assertions.harness.grading import ItemGrade
from assertions.statistics import pass_at_k, pass_power_k_plugin

JSON = Any


def _rate(passed: int, total: int) -> float:
    return round(passed / total, 3) if total else 0.0


def _group(grades: Sequence[ItemGrade], key: str) -> dict[str, dict[str, JSON]]:
    groups: dict[str, dict[str, JSON]] = defaultdict(lambda: {"total": 0, "passed": 0})
    for g in grades:
        name = str(getattr(g.item, key))
        groups[name]["total"] += 1
        groups[name]["passed"] += g.status == "pass"
    for entry in groups.values():
        entry["pass_rate"] = _rate(entry["passed"], entry["total"])
    return dict(sorted(groups.items()))


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 3) if present else None


def metrics(grades: Sequence[ItemGrade], ks: Sequence[int] = (3,)) -> dict[str, float | None]:
    graded = [g for g in grades if g.status in ("pass", "fail") and g.attempts]
    out: dict[str, float | None] = {
        "pass_at_1": _mean([g.passed_attempts / len(g.attempts) for g in graded])
    }
    for k in ks:
        out[f"pass_at_{k}"] = _mean(
            [pass_at_k(len(g.attempts), g.passed_attempts, k) for g in graded]
        )
        out[f"pass_hat_{k}"] = _mean(
            [pass_power_k_plugin(len(g.attempts), g.passed_attempts, k) for g in graded]
        )
    return out


def build_report(
    grades: Sequence[ItemGrade],
    *,
    suite_name: str,
    run_id: str,
    timestamp: str,
    duration_seconds: float | None = None,
    environment: dict[str, JSON] | None = None,
    ks: Sequence[int] = (3,),
) -> dict[str, JSON]:
    """The report as the eval-harness `eval_report` mapping (time and ids are passed in)."""
    counts = {
        s: sum(1 for g in grades if g.status == s) for s in ("pass", "fail", "error", "skipped")
    }
    failures = [
        {
            "eval_id": g.item.key,
            "name": g.item.name,
            "status": g.status,
            "reason": g.reason(),
            "details": g.attempts[0].to_json()["details"] if g.attempts else {},
        }
        for g in grades
        if g.status in ("fail", "error")
    ]
    return {
        "eval_report": {
            "metadata": {
                "suite_name": suite_name,
                "run_id": run_id,
                "timestamp": timestamp,
                "duration_seconds": duration_seconds,
                "environment": environment or {},
            },
            "summary": {
                "total_evals": len(grades),
                "passed": counts["pass"],
                "failed": counts["fail"],
                "errors": counts["error"],
                "skipped": counts["skipped"],
                "pass_rate": _rate(counts["pass"], len(grades) - counts["skipped"]),
                "by_category": _group(grades, "eval_type"),
                "by_topic": _group(grades, "category"),
                "by_grader": _group(grades, "grader_type"),
            },
            "metrics": metrics(grades, ks),
            "failures": failures,
            "skipped": [{"eval_id": g.item.key, "reason": g.skipped} for g in grades if g.skipped],
            "recommendations": [
                f"Fix {f['eval_id']} ({f['name'] or 'unnamed'}): {f['reason']}" for f in failures
            ],
        }
    }


def _cell(value: JSON) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: dict[str, JSON]) -> str:
    r = report["eval_report"]
    meta, s = r["metadata"], r["summary"]
    lines = [
        f"# Eval report: {meta['suite_name']}",
        "",
        f"Run `{meta['run_id']}` at {meta['timestamp']}.",
        "",
        f"**{s['passed']} passed, {s['failed']} failed, {s['errors']} errors, "
        f"{s['skipped']} skipped** of {s['total_evals']} (pass rate {s['pass_rate']:.1%}).",
    ]
    for title, key in (
        ("By category", "by_category"),
        ("By topic", "by_topic"),
        ("By grader", "by_grader"),
    ):
        lines += [
            "",
            f"## {title}",
            "",
            "| group | passed | total | pass rate |",
            "|---|---|---|---|",
        ]
        for name, g in s[key].items():
            lines.append(f"| {_cell(name)} | {g['passed']} | {g['total']} | {g['pass_rate']:.1%} |")
    lines += ["", "## Metrics", "", "| metric | value |", "|---|---|"]
    for name, value in r["metrics"].items():
        lines.append(f"| {name} | {'n/a' if value is None else f'{value:.3f}'} |")
    if r["failures"]:
        lines += ["", "## Failures", "", "| eval | status | reason |", "|---|---|---|"]
        for f in r["failures"]:
            lines.append(f"| {_cell(f['eval_id'])} | {f['status']} | {_cell(f['reason'])} |")
    if r["skipped"]:
        lines += ["", "## Skipped", ""]
        lines += [f"- {_cell(x['eval_id'])}: {_cell(x['reason'])}" for x in r["skipped"]]
    if r["recommendations"]:
        lines += ["", "## Recommendations", ""]
        lines += [f"- {_cell(x)}" for x in r["recommendations"]]
    return "\n".join(lines) + "\n"
