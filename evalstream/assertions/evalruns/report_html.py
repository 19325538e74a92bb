"""A single-file HTML report: inline CSS, inline SVG charts, a little inline script (sorting
and a status filter) that the page does not need to be readable. No CDN, no server."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

from evalstream.assertions.evalruns.compare import Comparison
from evalstream.assertions.evalruns.matrix import MatrixResult
from evalstream.assertions.evalruns.models import CaseResult, DatasetResult
from evalstream.assertions.evalruns.summaries import (
    by_category,
    num,
    pass_metric_rows,
    pct,
    signed_pct,
    usd,
)
from evalstream.assertions.evalruns.svg import (
    CAND_COLOUR,
    FAIL_COLOUR,
    PASS_COLOUR,
    Bar,
    hbar_chart,
    histogram,
    paired_chart,
)

_ID_ATTR = re.compile(r' id="[^"]*"')

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2330}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.meta{color:#5b6475;margin-bottom:16px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{border:1px solid #dde1e8;border-radius:8px;padding:10px 14px;min-width:120px}
.card .v{font-size:22px;font-weight:600}.card .l{color:#5b6475;font-size:12px}
.block{background:#fdecea;border:1px solid #f3b8b2;padding:10px 14px;border-radius:8px}
.ok{background:#e9f7ef;border:1px solid #b6e2c6;padding:10px 14px;border-radius:8px}
table{border-collapse:collapse;margin:8px 0}th,td{border-bottom:1px solid #e4e7ec;padding:4px 10px;
text-align:left;vertical-align:top}th{background:#f5f6f8;cursor:pointer}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.passed{color:#1e7a45}.failed{color:#b3261e}.error{color:#a15c00}.skipped{color:#6b7280}
.charts{display:flex;flex-wrap:wrap;gap:24px}
.chart-title{font-weight:600;font-size:13px}.bar-label,.bar-value,.legend,.axis,.bin-count{font-size:11px}
.note{color:#5b6475}.filters{margin:8px 0}.filters button{margin-right:6px}
code{background:#f2f3f5;padding:0 3px;border-radius:3px}
"""

SCRIPT = """
(function(){
  function sortBy(table, col){
    var body = table.tBodies[0]; var rows = Array.prototype.slice.call(body.rows);
    var asc = table.getAttribute('data-sort') !== String(col);
    rows.sort(function(a,b){
      var x = a.cells[col].getAttribute('data-v') || a.cells[col].textContent;
      var y = b.cells[col].getAttribute('data-v') || b.cells[col].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var r = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? r : -r;
    });
    rows.forEach(function(r){ body.appendChild(r); });
    table.setAttribute('data-sort', asc ? String(col) : '');
  }
  document.querySelectorAll('table.sortable').forEach(function(t){
    Array.prototype.forEach.call(t.tHead.rows[0].cells, function(th, i){
      th.addEventListener('click', function(){ sortBy(t, i); });
    });
  });
  document.querySelectorAll('.filters button').forEach(function(b){
    b.addEventListener('click', function(){
      var want = b.getAttribute('data-status');
      document.querySelectorAll('tr[data-status]').forEach(function(r){
        r.style.display = (want === 'all' || r.getAttribute('data-status') === want) ? '' : 'none';
      });
    });
  });
  var shown = document.querySelectorAll('tr[data-status]').length;
  var counter = document.getElementById('rows-shown');
  if (counter) { counter.textContent = shown + ' case rows'; }
  document.body.setAttribute('data-enhanced', 'yes');
})();
"""


def _page(title: str, body: Sequence[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        + "".join(body)
        + f"<script>{SCRIPT}</script></body></html>\n"
    )


def _card(value: str, label: str, ident: str | None = None) -> str:
    id_attr = f' id="{ident}"' if ident else ""
    return (
        f'<div class="card"><div class="v"{id_attr}>{escape(value)}</div>'
        f'<div class="l">{escape(label)}</div></div>'
    )


def _rate_colour(rate: float) -> str:
    return PASS_COLOUR if rate >= 0.999 else (FAIL_COLOUR if rate < 0.5 else "#d99a1e")


def _dataset_cards(r: DatasetResult) -> str:
    a = r.aggregate_metrics
    return (
        '<div class="cards">'
        + _card(pct(r.pass_rate), "pass rate", "pass-rate")
        + _card(f"{r.passed_cases}/{r.evaluated_cases}", "cases passed", "cases-passed")
        + _card(str(r.failed_cases), "failed")
        + _card(str(r.error_cases), "errors")
        + _card(str(r.skipped_cases), "skipped")
        + _card(f"{num(a.p50_latency_ms)} ms", "latency p50", "latency-p50")
        + _card(f"{num(a.p95_latency_ms)} ms", "latency p95")
        + _card(usd(a.total_cost), "total cost", "total-cost")
        + "</div>"
    )


def _metrics_table(r: DatasetResult) -> str:
    a = r.aggregate_metrics
    rows = [(label, value, how) for label, value, how in pass_metric_rows(r.pass_metrics)]
    rows += [
        (
            "latency p50 / p95 / p99 (ms)",
            f"{num(a.p50_latency_ms)} / {num(a.p95_latency_ms)} / {num(a.p99_latency_ms)}",
            f"over {a.completed_samples} completed sample(s)",
        ),
        (
            "latency avg / min / max (ms)",
            f"{num(a.avg_latency_ms)} / {num(a.min_latency_ms)} / {num(a.max_latency_ms)}",
            "",
        ),
        (
            "cost total / per case",
            f"{usd(a.total_cost)} / {usd(a.avg_cost_per_case)}",
            "" if a.cost_complete else "incomplete: a model has no price",
        ),
        ("tokens total / per case", f"{num(a.total_tokens, 0)} / {num(a.avg_tokens_per_case)}", ""),
        ("activations", num(a.total_activations, 0), ""),
    ]
    body = "".join(
        f'<tr><td>{escape(label)}</td><td class="num">{escape(value)}</td>'
        f'<td class="note">{escape(how)}</td></tr>'
        for label, value, how in rows
    )
    note = (
        f'<p class="note">{escape(r.pass_metrics.undefined_reason)}</p>'
        if r.pass_metrics.undefined_reason
        else ""
    )
    return (
        '<table id="metrics"><thead><tr><th>metric</th><th>value</th><th>definition</th>'
        f"</tr></thead><tbody>{body}</tbody></table>{note}"
    )


def _case_table(cases: Sequence[CaseResult]) -> str:
    rows = []
    for c in cases:
        m = c.metrics
        sample = c.representative()
        why = ""
        if c.skip_reason:
            why = c.skip_reason
        elif sample is not None and not sample.passed:
            failed = sample.failed_assertions()
            why = sample.error or "; ".join(f"{a.type}: {a.message}" for a in failed)
        rows.append(
            f'<tr data-status="{c.status}"><td><code>{escape(c.case_id)}</code></td>'
            f"<td>{escape(c.category or '')}</td>"
            f'<td class="{c.status}">{c.status}</td>'
            f'<td class="num" data-v="{c.pass_rate if c.pass_rate is not None else -1}">'
            f"{c.passes}/{c.n}</td>"
            f'<td class="num" data-v="{m.latency_ms if m else -1}">'
            f"{num(m.latency_ms) if m else 'n/a'}</td>"
            f'<td class="num" data-v="{m.cost if m else -1}">{usd(m.cost) if m else "n/a"}</td>'
            f'<td class="num">{num(m.total_tokens, 0) if m else "n/a"}</td>'
            f"<td>{escape(why)}</td></tr>"
        )
    filters = "".join(
        f'<button data-status="{s}">{s}</button>'
        for s in ("all", "passed", "failed", "error", "skipped")
    )
    return (
        f'<div class="filters">{filters} <span id="rows-shown" class="note"></span></div>'
        '<table class="sortable" id="cases"><thead><tr><th>case</th><th>category</th>'
        "<th>status</th><th>passes</th><th>latency ms</th><th>cost</th><th>tokens</th>"
        f"<th>why</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _dataset_charts(r: DatasetResult) -> str:
    evaluated = [c for c in r.cases if c.samples]
    case_bars = [
        Bar(
            c.case_id,
            c.pass_rate or 0.0,
            f"{pct(c.pass_rate)} ({c.passes}/{c.n})",
            _rate_colour(c.pass_rate or 0.0),
        )
        for c in evaluated
    ]
    cat_bars = [
        Bar(
            row.category,
            row.pass_rate,
            f"{pct(row.pass_rate)} ({row.passed}/{row.cases})",
            _rate_colour(row.pass_rate),
        )
        for row in by_category(r)
    ]
    done = [s for c in evaluated for s in c.samples if s.completed and s.metrics is not None]
    latencies = [s.metrics.latency_ms for s in done if s.metrics is not None]
    costs = [s.metrics.cost for c in evaluated for s in c.samples if s.metrics is not None]
    return (
        '<div class="charts">'
        + hbar_chart("Pass rate by case", case_bars, scale=1.0)
        + hbar_chart("Pass rate by category", cat_bars, scale=1.0)
        + histogram("Latency distribution", latencies, unit="ms")
        + histogram("Cost distribution", costs, unit="USD")
        + "</div>"
    )


def dataset_body(r: DatasetResult, heading: str = "h1") -> list[str]:
    who = " · ".join(
        x
        for x in (
            f"run {r.run_id}",
            f"target {r.target}" if r.target else "",
            f"variant {r.variant_id}" if r.variant_id else "",
            r.started_at or "",
            f"{r.options.repeat} sample(s) per case",
        )
        if x
    )
    out = [
        f"<{heading}>Eval: {escape(r.name)}</{heading}>",
        f'<div class="meta">{escape(who)}</div>',
    ]
    if r.interrupted:
        out.append('<p class="block">Interrupted: only the cases that finished are reported.</p>')
    if r.stopped_early:
        out.append(f'<p class="block">Stopped early: {escape(r.stopped_early)}</p>')
    out += [
        _dataset_cards(r),
        _dataset_charts(r),
        "<h2>Metrics</h2>",
        _metrics_table(r),
        "<h2>Cases</h2>",
        _case_table(r.cases),
    ]
    return out


def dataset_html(r: DatasetResult) -> str:
    return _page(f"Eval: {r.name}", dataset_body(r))


def comparison_html(c: Comparison) -> str:
    s = c.summary
    b, k = c.baseline, c.candidate
    bname, kname = b.variant_id or b.run_id, k.variant_id or k.run_id
    gate_class = "block" if s.should_block else "ok"
    gate = "BLOCKS" if s.should_block else "does not block"
    reasons = "".join(f"<li>{escape(x)}</li>" for x in s.block_reasons)
    out = [
        f"<h1>Comparison: {escape(bname)} → {escape(kname)}</h1>",
        f'<div class="meta">{escape(k.name)} · fail-on {s.fail_on}</div>',
        f'<div class="{gate_class}" id="gate"><strong>Verdict: {s.verdict}</strong> — {gate}'
        f"<ul>{reasons}</ul></div>",
        '<div class="cards">',
        _card(pct(b.pass_rate), "baseline pass rate", "baseline-pass-rate"),
        _card(pct(k.pass_rate), "candidate pass rate", "candidate-pass-rate"),
        _card(signed_pct(s.pass_rate_delta), "pass rate Δ"),
        _card(
            str(len(c.regressions)),
            f"regressions ({sum(1 for r in c.regressions if r.severity == 'critical')} critical)",
            "regression-count",
        ),
        _card(str(len(c.improvements)), "improvements"),
        _card(signed_pct(s.cost_delta_pct), "cost per case Δ"),
        _card(signed_pct(s.avg_latency_delta_pct), "latency Δ"),
        "</div>",
    ]
    base_by_id = {x.case_id: x for x in b.cases if x.samples}
    pairs = []
    for cand in k.cases:
        base = base_by_id.get(cand.case_id)
        if base is None or not cand.samples:
            continue
        pairs.append(
            (
                cand.case_id,
                base.pass_rate or 0.0,
                cand.pass_rate or 0.0,
                pct(base.pass_rate),
                pct(cand.pass_rate),
            )
        )
    ba, ka = b.aggregate_metrics, k.aggregate_metrics
    top = max(ba.avg_cost_per_case or 0.0, ka.avg_cost_per_case or 0.0) or 1.0
    lat_top = max(ba.avg_latency_ms or 0.0, ka.avg_latency_ms or 0.0) or 1.0
    summary_pairs = [
        ("pass rate", b.pass_rate, k.pass_rate, pct(b.pass_rate), pct(k.pass_rate)),
        (
            "avg cost per case",
            (ba.avg_cost_per_case or 0.0) / top,
            (ka.avg_cost_per_case or 0.0) / top,
            usd(ba.avg_cost_per_case),
            usd(ka.avg_cost_per_case),
        ),
        (
            "avg latency",
            (ba.avg_latency_ms or 0.0) / lat_top,
            (ka.avg_latency_ms or 0.0) / lat_top,
            f"{num(ba.avg_latency_ms)} ms",
            f"{num(ka.avg_latency_ms)} ms",
        ),
    ]
    out += [
        '<div class="charts">',
        paired_chart("Baseline vs candidate", summary_pairs),
        paired_chart("Pass rate by case: baseline vs candidate", pairs),
        "</div>",
    ]
    if c.regressions:
        rows = "".join(
            f"<tr><td><code>{escape(r.case_id)}</code></td><td>{r.type}</td>"
            f'<td class="{"failed" if r.severity == "critical" else "error"}">{r.severity}</td>'
            f"<td>{escape(r.description)}</td></tr>"
            for r in c.regressions
        )
        out += [
            "<h2>Regressions</h2>",
            '<table id="regressions"><thead><tr><th>case</th><th>type</th><th>severity</th>'
            f"<th>what</th></tr></thead><tbody>{rows}</tbody></table>",
        ]
    if c.improvements:
        rows = "".join(
            f"<tr><td><code>{escape(i.case_id)}</code></td><td>{i.type}</td>"
            f"<td>{escape(i.description)}</td></tr>"
            for i in c.improvements
        )
        out += [
            "<h2>Improvements</h2>",
            "<table><thead><tr><th>case</th><th>type</th><th>what</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>",
        ]
    if c.inconclusive:
        items = "".join(
            f"<li><code>{escape(i.case_id)}</code>: {escape(i.description)}</li>"
            for i in c.inconclusive
        )
        out += ["<h2>Inconclusive</h2>", f"<ul>{items}</ul>"]
    extra = []
    if c.new_cases:
        extra.append(f"New in candidate: {', '.join(c.new_cases)}.")
    if c.removed_cases:
        extra.append(f"Not in candidate: {', '.join(c.removed_cases)}.")
    extra.append(f"Unchanged: {len(c.unchanged)} case(s).")
    out.append(f'<p class="note">{escape(" ".join(extra))}</p>')
    if c.profile_check is not None:
        rows = "".join(
            f'<tr><td>{escape(r.metric)}</td><td class="num">'
            f"{pct(r.value) if r.value is not None else 'undefined'}</td>"
            f'<td class="num">{r.threshold:g}</td><td>{r.status}'
            f"{(' — ' + escape(r.note)) if r.note else ''}</td></tr>"
            for r in c.profile_check.rows
        )
        out += [
            f"<h2>Threshold profile {escape(c.profile_check.profile)}</h2>",
            "<table><thead><tr><th>metric</th><th>value</th><th>threshold</th><th>status</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>",
        ]
    out += ["<h2>Candidate cases</h2>", _case_table(k.cases)]
    return _page(f"Comparison {bname} → {kname}", out)


def matrix_html(m: MatrixResult) -> str:
    frontier = set(m.comparison.pareto_frontier)
    rows = []
    for v in m.variants:
        r, a = v.result, v.result.aggregate_metrics
        rows.append(
            f'<tr data-variant="{escape(v.variant_id)}"><td><code>{escape(v.variant_id)}</code>'
            f"</td><td>{escape(v.variant_name)}</td>"
            f'<td class="num" data-v="{r.pass_rate}">{pct(r.pass_rate)}</td>'
            f'<td class="num">{r.passed_cases}/{r.evaluated_cases}</td>'
            f'<td class="num" data-v="{a.avg_cost_per_case or -1}">{usd(a.avg_cost_per_case)}</td>'
            f'<td class="num" data-v="{a.avg_latency_ms or -1}">{num(a.avg_latency_ms)}</td>'
            f"<td>{'★' if v.variant_id in frontier else ''}</td></tr>"
        )
    rec = m.recommendation
    rec_html = ""
    if rec is not None:
        trade = "".join(f"<li>{escape(t)}</li>" for t in rec.tradeoffs)
        rec_html = (
            f'<div class="ok" id="recommendation"><strong>Recommendation: '
            f"{escape(rec.variant_id)}</strong> (confidence {rec.confidence}): "
            f"{escape(rec.reason)}<ul>{trade}</ul></div>"
        )
    top_cost = max((v.result.aggregate_metrics.avg_cost_per_case or 0.0) for v in m.variants) or 1
    out = [
        f"<h1>Matrix: {escape(m.name)}</h1>",
        f'<div class="meta">{len(m.variants)} variant(s) · Pareto frontier: '
        f"{escape(', '.join(m.comparison.pareto_frontier))}</div>",
        rec_html,
        '<div class="charts">',
        hbar_chart(
            "Pass rate by variant",
            [
                Bar(
                    v.variant_id,
                    v.result.pass_rate,
                    pct(v.result.pass_rate),
                    _rate_colour(v.result.pass_rate),
                )
                for v in m.variants
            ],
            scale=1.0,
        ),
        hbar_chart(
            "Average cost per case",
            [
                Bar(
                    v.variant_id,
                    v.result.aggregate_metrics.avg_cost_per_case or 0.0,
                    usd(v.result.aggregate_metrics.avg_cost_per_case),
                    CAND_COLOUR,
                )
                for v in m.variants
            ],
            scale=top_cost,
        ),
        "</div>",
        '<table class="sortable" id="variants"><thead><tr><th>variant</th><th>name</th>'
        "<th>pass rate</th><th>passed</th><th>cost/case</th><th>avg ms</th><th>Pareto</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>",
    ]
    for vid, c in m.comparisons.items():
        gate = "BLOCKS" if c.summary.should_block else "does not block"
        out.append(
            f'<div class="{"block" if c.summary.should_block else "ok"}">'
            f"<strong>{escape(vid)} vs {escape(m.baseline_variant or '')}</strong>: "
            f"{c.summary.verdict}, {gate}"
            f"{(' — ' + escape(c.summary.block_reason)) if c.summary.block_reason else ''}</div>"
        )
    for v in m.variants:
        # Element ids belong to the page's own figures; a variant's section repeats them.
        out += [_ID_ATTR.sub("", part) for part in dataset_body(v.result, heading="h2")]
    return _page(f"Matrix: {m.name}", out)
