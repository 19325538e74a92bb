"""The eval-harness eval report: metadata, summary (by category, by grader), metrics, failures,
pending human reviews and recommendations; as JSON (the `eval_report` mapping) and Markdown.

`by_category` groups by eval type (capability / regression), as the methodology's sample does;
`by_topic` groups by the eval's own `category` (e.g. `code_generation`). `items` lists every
item with its status, so every renderer (JUnit included) works from the saved JSON alone; a
model-graded item's row keeps the judge's scores of its first attempt (`judge`), which
`evalstream review calibration` compares with human reviews.

Metrics, one rule for every k: an item with n attempts of which c passed counts for a metric
of k only when n >= k; items with fewer attempts are left out of pass@k and pass^k alike, and
`metrics_coverage` says how many were left out. pass@1 is the mean of c/n; pass@k the mean of
the unbiased 1 - C(n-c, k) / C(n, k); pass^k the mean of (c/n)^k, the methodology's
definition. An attempt whose grader errored is an attempt that did not pass; a human item
still awaiting ratings counts as one attempt that did not pass (never a pass); skipped items
(no output) count for nothing. A metric no item can support is null.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from evalstream.assertions.harness.grading import ItemGrade
from evalstream.assertions.harness.junit import render_junit
from evalstream.assertions.statistics import pass_at_k, pass_power_k_plugin

JSON = Any
STATUSES = ("pass", "fail", "error", "pending", "skipped")


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


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def attempt_counts(grade: ItemGrade) -> tuple[int, int] | None:
    """(n attempts, c passed) as the metrics see an item; None when it counts for nothing."""
    if grade.status == "pending":
        return (1, 0)
    if grade.status == "skipped" or not grade.attempts:
        return None
    return (len(grade.attempts), grade.passed_attempts)


def metric_names(ks: Sequence[int]) -> list[str]:
    names = ["pass_at_1"]
    for k in sorted({k for k in ks if k > 1}):
        names += [f"pass_at_{k}", f"pass_hat_{k}"]
    if 1 in ks:
        names.append("pass_hat_1")
    return names


def metrics_with_coverage(
    grades: Sequence[ItemGrade], ks: Sequence[int] = (3,)
) -> tuple[dict[str, float | None], dict[str, dict[str, int]]]:
    """The metrics and, per metric, how many items it counted and how many had fewer than k
    attempts (left out)."""
    counts = [c for c in (attempt_counts(g) for g in grades) if c is not None]
    values: dict[str, float | None] = {}
    coverage: dict[str, dict[str, int]] = {}
    for name in metric_names(ks):
        k = int(name.rsplit("_", 1)[1])
        estimator = pass_at_k if name.startswith("pass_at_") else pass_power_k_plugin
        eligible = [(n, c) for n, c in counts if n >= k]
        estimates = [estimator(n, c, k) for n, c in eligible]
        values[name] = _mean([e for e in estimates if e is not None])
        coverage[name] = {
            "items": len(eligible),
            "excluded_fewer_than_k_attempts": len(counts) - len(eligible),
        }
    return values, coverage


def metrics(grades: Sequence[ItemGrade], ks: Sequence[int] = (3,)) -> dict[str, float | None]:
    return metrics_with_coverage(grades, ks)[0]


def _judge_of(g: ItemGrade) -> dict[str, JSON] | None:
    """A model-graded item's first judged attempt (the output a review queue takes): its
    normalised score and per-criterion scores, for calibration against human reviews."""
    if g.item.grader_type != "model" or not g.attempts or g.attempts[0].error is not None:
        return None
    first = g.attempts[0]
    return {"score": first.score, "criteria_scores": first.details.get("criteria_scores", {})}


def _item_row(g: ItemGrade) -> dict[str, JSON]:
    return {
        "eval_id": g.item.key,
        "name": g.item.name,
        "eval_type": g.item.eval_type,
        "category": g.item.category,
        "grader_type": g.item.grader_type,
        "status": g.status,
        "attempts": len(g.attempts),
        "passed_attempts": g.passed_attempts,
        "reason": g.reason(),
        "source": g.item.source,
        "judge": _judge_of(g),
    }


def build_report(
    grades: Sequence[ItemGrade],
    *,
    suite_name: str,
    run_id: str,
    timestamp: str,
    duration_seconds: float | None = None,
    environment: dict[str, JSON] | None = None,
    ks: Sequence[int] = (3,),
    warnings: Sequence[str] = (),
) -> dict[str, JSON]:
    """The report as the eval-harness `eval_report` mapping (time and ids are passed in).
    The pass rate counts pending and errored items as not passed; skipped ones are left out."""
    counts = {s: sum(1 for g in grades if g.status == s) for s in STATUSES}
    values, coverage = metrics_with_coverage(grades, ks)
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
                "pending": counts["pending"],
                "skipped": counts["skipped"],
                "pass_rate": _rate(counts["pass"], len(grades) - counts["skipped"]),
                "by_category": _group(grades, "eval_type"),
                "by_topic": _group(grades, "category"),
                "by_grader": _group(grades, "grader_type"),
            },
            "metrics": values,
            "metrics_coverage": coverage,
            "failures": failures,
            "pending": [{"eval_id": g.item.key, "reason": g.pending} for g in grades if g.pending],
            "skipped": [{"eval_id": g.item.key, "reason": g.skipped} for g in grades if g.skipped],
            "warnings": list(warnings),
            "items": [_item_row(g) for g in grades],
            "recommendations": [
                f"Fix {f['eval_id']} ({f['name'] or 'unnamed'}): {f['reason']}" for f in failures
            ],
        }
    }


def _cell(value: JSON) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _metric(value: JSON) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render_markdown(report: dict[str, JSON]) -> str:
    r = report["eval_report"]
    meta, s = r["metadata"], r["summary"]
    lines = [
        f"# Eval report: {meta['suite_name']}",
        "",
        f"Run `{meta['run_id']}` at {meta['timestamp']}.",
        "",
        f"**{s['passed']} passed, {s['failed']} failed, {s['errors']} errors, "
        f"{s.get('pending', 0)} pending human review, {s['skipped']} skipped** of "
        f"{s['total_evals']} (pass rate {s['pass_rate']:.1%}; pending and errors count as not "
        "passed).",
    ]
    gate = r.get("gate")
    if gate:
        verdict = "passed" if gate["passed"] else "FAILED"
        effect = "" if gate["passed"] else (" (blocking)" if gate["blocking"] else " (warning)")
        lines += ["", "## Thresholds", "", f"Gate {verdict}{effect}.", ""]
        lines += ["| metric | value | threshold | result |", "|---|---|---|---|"]
        for row in gate["rows"]:
            result = "pass" if row["passed"] else "FAIL"
            note = f" ({_cell(row['note'])})" if row.get("note") else ""
            lines.append(
                f"| {row['metric']} | {_metric(row['value'])} | {row['threshold']:g} | "
                f"{result}{note} |"
            )
    if r.get("warnings"):
        lines += ["", "## Warnings", ""]
        lines += [f"- {_cell(x)}" for x in r["warnings"]]
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
    coverage = r.get("metrics_coverage", {})
    lines += ["", "## Metrics", "", "| metric | value | items | left out (< k attempts) |"]
    lines.append("|---|---|---|---|")
    for name, value in r["metrics"].items():
        cov = coverage.get(name, {})
        lines.append(
            f"| {name} | {_metric(value)} | {cov.get('items', '')} | "
            f"{cov.get('excluded_fewer_than_k_attempts', '')} |"
        )
    if r["failures"]:
        lines += ["", "## Failures", "", "| eval | status | reason |", "|---|---|---|"]
        for f in r["failures"]:
            lines.append(f"| {_cell(f['eval_id'])} | {f['status']} | {_cell(f['reason'])} |")
    if r.get("pending"):
        lines += ["", "## Pending human review", ""]
        lines += [f"- {_cell(x['eval_id'])}: {_cell(x['reason'])}" for x in r["pending"]]
    if r["skipped"]:
        lines += ["", "## Skipped", ""]
        lines += [f"- {_cell(x['eval_id'])}: {_cell(x['reason'])}" for x in r["skipped"]]
    if r["recommendations"]:
        lines += ["", "## Recommendations", ""]
        lines += [f"- {_cell(x)}" for x in r["recommendations"]]
    return "\n".join(lines) + "\n"


REPORT_FORMATS = ("md", "json", "junit")
SUFFIX_FORMATS = {".md": "md", ".markdown": "md", ".json": "json", ".xml": "junit"}


def render_report(report: dict[str, JSON], fmt: str) -> str:
    """The report as Markdown, JSON (the `eval_report` mapping) or JUnit XML."""
    if fmt == "md":
        return render_markdown(report)
    if fmt == "json":
        return json.dumps(report, indent=2, sort_keys=False) + "\n"
    if fmt == "junit":
        return render_junit(report)
    raise ValueError(f"unknown report format {fmt!r}; formats: {', '.join(REPORT_FORMATS)}")
