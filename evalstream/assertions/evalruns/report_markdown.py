"""Markdown reports of a dataset run, a comparison and a matrix run (for PR comments)."""

from __future__ import annotations

from evalstream.assertions.evalruns.compare import Comparison
from evalstream.assertions.evalruns.matrix import MatrixResult
from evalstream.assertions.evalruns.models import CaseResult, DatasetResult
from evalstream.assertions.evalruns.profiles import ProfileCheck
from evalstream.assertions.evalruns.summaries import (
    by_category,
    num,
    pass_metric_rows,
    pct,
    signed_pct,
    status_mark,
    usd,
)

MAX_CASES_IN_DETAIL = 10


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return out


def _dataset_metrics(r: DatasetResult) -> list[str]:
    a = r.aggregate_metrics
    rows = [[label, value, how] for label, value, how in pass_metric_rows(r.pass_metrics)]
    rows += [
        [
            "latency p50 / p95 / p99",
            f"{num(a.p50_latency_ms)} / {num(a.p95_latency_ms)} / {num(a.p99_latency_ms)} ms",
            f"over {a.completed_samples} completed sample(s)",
        ],
        [
            "latency avg (min-max)",
            f"{num(a.avg_latency_ms)} ms ({num(a.min_latency_ms)}-{num(a.max_latency_ms)})",
            "",
        ],
        [
            "cost total / per case",
            f"{usd(a.total_cost)} / {usd(a.avg_cost_per_case)}",
            "" if a.cost_complete else "incomplete: a model has no price",
        ],
        ["tokens total / per case", f"{num(a.total_tokens, 0)} / {num(a.avg_tokens_per_case)}", ""],
        ["activations", num(a.total_activations, 0), ""],
    ]
    out = _table(["metric", "value", "definition"], rows)
    if r.pass_metrics.undefined_reason:
        out += ["", f"> {r.pass_metrics.undefined_reason}"]
    return out


def _case_rows(cases: list[CaseResult]) -> list[list[str]]:
    rows = []
    for c in cases:
        m = c.metrics
        rows.append(
            [
                f"{status_mark(c.status)} `{c.case_id}`",
                c.category or "",
                c.status + (f" ({c.skip_reason})" if c.skip_reason else ""),
                f"{c.passes}/{c.n}" if c.samples else "-",
                num(m.latency_ms) if m else "n/a",
                usd(m.cost) if m else "n/a",
                num(m.total_tokens, 0) if m else "n/a",
            ]
        )
    return rows


def _failure_details(cases: list[CaseResult], limit: int) -> list[str]:
    bad = [c for c in cases if c.status in {"failed", "error"}]
    if not bad:
        return []
    out = ["", "## Failures", ""]
    for c in bad[:limit]:
        out.append(f"### `{c.case_id}` — {c.label}")
        for s in c.samples:
            if s.passed:
                continue
            out.append(
                f"- sample {s.index}: **{s.status}**"
                + (f" after {s.attempts} attempts" if s.attempts > 1 else "")
            )
            if s.error:
                out.append(f"  - {s.error_kind}: {s.error}")
            for a in s.failed_assertions():
                out.append(f"  - ✗ `{a.type}` ({a.verdict}): {a.message}")
        out.append("")
    if len(bad) > limit:
        out.append(f"… and {len(bad) - limit} more failing case(s).")
    return out


def dataset_markdown(r: DatasetResult, *, max_cases_in_detail: int = MAX_CASES_IN_DETAIL) -> str:
    out = [f"# Eval: {r.name}", ""]
    who = f"target `{r.target}`" if r.target else ""
    if r.variant_id:
        who += f" · variant `{r.variant_id}`" + (f" ({r.variant_name})" if r.variant_name else "")
    out.append(f"Run `{r.run_id}` · {who} · {r.started_at or ''} · {num(r.duration_ms / 1000)} s")
    out.append("")
    out.append(
        f"**{r.passed_cases}/{r.evaluated_cases} evaluated cases passed — pass rate "
        f"{pct(r.pass_rate)}** · {r.failed_cases} failed · {r.error_cases} errors · "
        f"{r.skipped_cases} skipped · {r.options.repeat} sample(s) per case"
    )
    if r.interrupted:
        out += ["", "> ⚠️ Interrupted: only the cases that finished are reported."]
    if r.stopped_early:
        out += ["", f"> ⚠️ Stopped early: {r.stopped_early}"]
    out += ["", "## Metrics", "", *_dataset_metrics(r)]
    cats = by_category(r)
    if len(cats) > 1 or (cats and cats[0].category != "(none)"):
        out += ["", "## By category", ""]
        out += _table(
            ["category", "cases", "passed", "pass rate"],
            [[c.category, str(c.cases), str(c.passed), pct(c.pass_rate)] for c in cats],
        )
    out += ["", "## Cases", ""]
    out += _table(
        ["case", "category", "status", "passes", "latency ms", "cost", "tokens"],
        _case_rows(r.cases),
    )
    out += _failure_details(r.cases, max_cases_in_detail)
    return "\n".join(out).rstrip() + "\n"


def _profile_lines(check: ProfileCheck) -> list[str]:
    out = ["", f"## Threshold profile `{check.profile}`", ""]
    out += _table(
        ["metric", "value", "threshold", "status"],
        [
            [
                r.metric,
                pct(r.value) if r.value is not None else "undefined",
                f"{r.threshold:g}",
                r.status + (f" — {r.note}" if r.note else ""),
            ]
            for r in check.rows
        ],
    )
    return out


def comparison_markdown(c: Comparison) -> str:
    s = c.summary
    b, k = c.baseline, c.candidate
    bname = b.variant_id or b.run_id
    kname = k.variant_id or k.run_id
    out = [f"# Comparison: `{bname}` → `{kname}` ({k.name})", ""]
    gate = "🚫 **BLOCKS**" if s.should_block else "✅ does not block"
    out.append(f"**Verdict: {s.verdict}** — {gate} (fail-on {s.fail_on})")
    for reason in s.block_reasons:
        out.append(f"- {reason}")
    out += ["", "## Summary", ""]
    ba, ka = b.aggregate_metrics, k.aggregate_metrics
    out += _table(
        ["metric", "baseline", "candidate", "delta"],
        [
            ["pass rate", pct(b.pass_rate), pct(k.pass_rate), signed_pct(s.pass_rate_delta)],
            [
                "avg latency ms",
                num(ba.avg_latency_ms),
                num(ka.avg_latency_ms),
                f"{num(s.avg_latency_delta_ms)} ({signed_pct(s.avg_latency_delta_pct)})",
            ],
            [
                "avg cost per case",
                usd(ba.avg_cost_per_case),
                usd(ka.avg_cost_per_case),
                f"{usd(s.cost_delta)} ({signed_pct(s.cost_delta_pct)})",
            ],
            [
                "cases passed",
                f"{b.passed_cases}/{b.evaluated_cases}",
                f"{k.passed_cases}/{k.evaluated_cases}",
                "",
            ],
        ],
    )
    if c.regressions:
        out += ["", f"## Regressions ({len(c.regressions)})", ""]
        out += _table(
            ["case", "type", "severity", "what"],
            [[f"`{r.case_id}`", r.type, r.severity, r.description] for r in c.regressions],
        )
    if c.improvements:
        out += ["", f"## Improvements ({len(c.improvements)})", ""]
        out += _table(
            ["case", "type", "what"],
            [[f"`{i.case_id}`", i.type, i.description] for i in c.improvements],
        )
    if c.inconclusive:
        out += ["", "## Inconclusive (no statistical support)", ""]
        out += [f"- `{i.case_id}`: {i.description}" for i in c.inconclusive]
    out += ["", f"Unchanged: {len(c.unchanged)} case(s)."]
    if c.new_cases:
        out.append(f"New in candidate: {', '.join(f'`{x}`' for x in c.new_cases)}.")
    if c.removed_cases:
        out.append(f"Not in candidate: {', '.join(f'`{x}`' for x in c.removed_cases)}.")
    if c.profile_check is not None:
        out += _profile_lines(c.profile_check)
    return "\n".join(out).rstrip() + "\n"


def matrix_markdown(m: MatrixResult) -> str:
    out = [f"# Matrix: {m.name}", ""]
    frontier = set(m.comparison.pareto_frontier)
    rows = []
    for v in m.variants:
        r, a = v.result, v.result.aggregate_metrics
        rows.append(
            [
                f"`{v.variant_id}`" + (" (baseline)" if v.variant_id == m.baseline_variant else ""),
                v.variant_name,
                pct(r.pass_rate),
                f"{r.passed_cases}/{r.evaluated_cases}",
                usd(a.avg_cost_per_case),
                num(a.avg_latency_ms),
                num(a.p95_latency_ms),
                "★" if v.variant_id in frontier else "",
            ]
        )
    out += _table(
        ["variant", "name", "pass rate", "passed", "cost/case", "avg ms", "p95 ms", "Pareto"],
        rows,
    )
    cmp_ = m.comparison
    out += [
        "",
        f"- by pass rate: {' > '.join(cmp_.by_pass_rate)}",
        f"- by cost: {' < '.join(cmp_.by_cost)}",
        f"- by latency: {' < '.join(cmp_.by_latency)}",
        f"- Pareto frontier: {', '.join(cmp_.pareto_frontier)}",
    ]
    if m.recommendation:
        rec = m.recommendation
        out += [
            "",
            f"**Recommendation: `{rec.variant_id}`** (confidence {rec.confidence}): {rec.reason}",
        ]
        out += [f"- trade-off: {t}" for t in rec.tradeoffs]
    if m.comparisons:
        out += ["", f"## Compared with baseline `{m.baseline_variant}`", ""]
        out += _table(
            ["variant", "verdict", "gate", "regressions", "reason"],
            [
                [
                    f"`{vid}`",
                    c.summary.verdict,
                    "BLOCKS" if c.summary.should_block else "ok",
                    str(len(c.regressions)),
                    c.summary.block_reason or "",
                ]
                for vid, c in m.comparisons.items()
            ],
        )
    return "\n".join(out).rstrip() + "\n"
