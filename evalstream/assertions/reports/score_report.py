"""Reports of a scoring run (`"kind": "score-run"`, the results file of `evalstream score`).

`render_score_report(obj, fmt)` is a pure function of the results JSON: `markdown` for people
(summary, mean scores, alerts, windowed regressions, a row for each of the worst 500
episodes, rejected input) and `json` (the validated record, re-indented) for machines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from evalstream.assertions.scores.run import SCORE_NAMES, ScoreRun, ScoreRunError, check_score_run
from evalstream.assertions.scores.worst_episodes import LISTED_EPISODES, listing_key

JSON = Any
FORMATS = ("markdown", "json")


def _cell(value: JSON) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _score(value: JSON) -> str:
    return "—" if value is None else f"{value:.3f}"


def _delta(value: JSON, unbounded: JSON) -> str:
    if unbounded:
        return "+∞ %"
    return "—" if value is None else f"{value:+.1f} %"


def _source(source: Mapping[str, JSON]) -> str:
    if "store" in source:
        filters = source.get("filters") or {}
        shown = ", ".join(f"{k}={v}" for k, v in filters.items() if v is not None)
        return f"episode store {source['store']}" + (f" ({shown})" if shown else "")
    files = source.get("files") or []
    return "files " + ", ".join(str(f) for f in files) if files else "—"


def _baseline(baseline: Mapping[str, JSON]) -> str:
    mode = baseline.get("mode", "—")
    detail = baseline.get("detail")
    return f"{mode}" + (f" ({detail})" if detail else "")


def _episode_sort_key(ep: Mapping[str, JSON]) -> tuple[int, float]:
    return listing_key(ep.get("passed"), ep.get("scores", {}).get("overall"))


def _alerts_cell(alerts: Sequence[Mapping[str, JSON]]) -> str:
    if not alerts:
        return ""
    return ", ".join(f"{a.get('severity', '?').upper()} {a.get('dimension', '?')}" for a in alerts)


def render_markdown(
    obj: Mapping[str, JSON], listed: Sequence[Mapping[str, JSON]] | None = None
) -> str:
    """The report of the results `obj`. `listed`: the records of the episodes it lists, in
    order, picked as a streamed run was scored (`WorstEpisodes`; `obj` then holds none)."""
    s = obj["summary"]
    lines = [
        f"# evalstream score run — {obj.get('created_at', '')}",
        "",
        f"- Source: {_cell(_source(obj.get('source') or {}))}",
        f"- Baseline: {_cell(_baseline(obj.get('baseline') or {}))}",
        "",
        f"**{s.get('passed', 0)}/{s.get('episodes', 0)} episodes passed** — "
        f"{s.get('critical_episodes', 0)} with a CRITICAL alert, "
        f"{s.get('warning_episodes', 0)} with WARNINGs only, "
        f"{s.get('without_baseline', 0)} without a baseline, "
        f"{s.get('rejected', 0)} rejected, {s.get('skipped', 0)} skipped.",
        "",
        "## Mean scores",
        "",
        "| " + " | ".join(SCORE_NAMES) + " |",
        "|" + "---|" * len(SCORE_NAMES),
        "| " + " | ".join(_score(s.get("mean_scores", {}).get(n)) for n in SCORE_NAMES) + " |",
    ]
    alerts = s.get("alerts") or {}
    rows = [
        (severity, dim, count)
        for severity in ("critical", "warning")
        for dim, count in sorted((alerts.get(severity) or {}).items())
    ]
    lines += ["", "## Alerts", ""]
    if rows:
        lines += ["| severity | dimension | episodes |", "|---|---|---|"]
        lines += [f"| {sev.upper()} | {_cell(dim)} | {count} |" for sev, dim, count in rows]
    else:
        lines.append("No per-episode alert fired.")
    regressions = obj.get("regressions") or []
    if regressions:
        lines += [
            "",
            "## Windowed regressions",
            "",
            "| state | severity | agent/variant | metric | baseline | current | change | test |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in regressions:
            unit = " %" if r.get("change_unit") == "pct" else ""
            change = (
                "+∞"
                if r.get("change_unbounded")
                else ("—" if r.get("change") is None else f"{r['change']:+.3g}")
            )
            lines.append(
                f"| {r.get('state')} | {str(r.get('severity', '')).upper()} "
                f"| {_cell(r.get('agent_id'))}/{_cell(r.get('variant'))} "
                f"| {_cell(r.get('metric'))} "
                f"| {r.get('baseline_value', 0):.4g} | {r.get('current_value', 0):.4g} "
                f"| {change}{unit} | {_cell(r.get('test'))} |"
            )
    if listed is None:
        episodes = sorted(obj["episodes"], key=_episode_sort_key)
        count = len(episodes)
    else:
        episodes, count = list(listed), int(s.get("episodes", 0))
    lines += [
        "",
        "## Episodes",
        "",
        "| episode | agent | outcome | passed | overall | correctness | cost Δ | tool match "
        "| latency Δ | safety | alerts |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for ep in episodes[:LISTED_EPISODES]:
        sc = ep.get("scores") or {}
        lines.append(
            f"| {_cell(ep.get('episode_id'))} | {_cell(ep.get('agent_id') or '—')} "
            f"| {_cell(ep.get('outcome'))} | {'yes' if ep.get('passed') else '**no**'} "
            f"| {_score(sc.get('overall'))} | {_score(sc.get('correctness'))} "
            f"| {_delta(sc.get('cost_delta_pct'), sc.get('cost_rise_unbounded'))} "
            f"| {_score(sc.get('tool_match'))} "
            f"| {_delta(sc.get('latency_delta_pct'), sc.get('latency_rise_unbounded'))} "
            f"| {_score(sc.get('safety'))} | {_alerts_cell(ep.get('alerts') or [])} |"
        )
    if count > LISTED_EPISODES:
        lines.append("")
        lines.append(f"… {count - LISTED_EPISODES} more episodes in the JSON results.")
    rejected = obj.get("rejected") or []
    if rejected:
        lines += ["", "## Rejected input", ""]
        lines += [
            f"- `{_cell(r.get('where'))}` {r.get('reason')}: {_cell(r.get('message'))}"
            for r in rejected[:100]
        ]
    skipped = obj.get("skipped") or []
    if skipped:
        lines += ["", "## Skipped", ""]
        lines += [f"- `{_cell(s_.get('episode_id'))}`: {_cell(s_.get('reason'))}" for s_ in skipped]
    return "\n".join(lines).rstrip() + "\n"


def render_run_markdown(run: ScoreRun, summary: Mapping[str, JSON]) -> str:
    """The report of `run` (with its `summary()`): from the episodes a streamed run picked
    as it scored them, else from every episode it holds."""
    listed = run.tally.listed_records() if run.tally is not None else None
    return render_markdown(run.to_json(summary, episodes=listed is None), listed)


def render_json(obj: Mapping[str, JSON]) -> str:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n"


def render_score_report(obj: JSON, fmt: str = "markdown") -> str:
    """Render a score-run record; ScoreRunError for another kind of file or format."""
    run = check_score_run(obj)
    if fmt == "markdown":
        return render_markdown(run)
    if fmt == "json":
        return render_json(run)
    raise ScoreRunError(f"unknown report format {fmt!r}; valid: {', '.join(FORMATS)}")
