"""The terminal rendering of check results (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evalstream.assertions.evaluation.verdicts import Verdict
from evalstream.assertions.reports.check_report import CheckReport
from evalstream.stream.console.rejections import RejectionLog

_STYLE = {"passed": "green", "failed": "red", "error": "yellow", "unevaluated": "dim"}


def print_table(report: CheckReport, console: Console) -> None:
    table = Table(title="evalstream check", show_lines=False)
    for column in ("episode", "case", "status", "close", "signals", "assertions"):
        table.add_column(
            column,
            justify="right" if column == "signals" else "left",
            overflow="fold",  # ids are what users grep for: never truncate them
        )
    for r in report.results:
        ok = sum(1 for a in r.assertions if a.verdict == Verdict.PASS)
        table.add_row(
            r.episode_id,
            r.case_id or "—",
            Text(r.status, style=_STYLE[r.status]),
            r.close_reason,
            str(r.signals),
            f"{ok}/{len(r.assertions)}",
        )
    console.print(table)
    for r in report.results:
        bad = [a for a in r.assertions if a.verdict != Verdict.PASS]
        if not bad:
            continue
        console.print(Text(f"{r.episode_id} ({r.case_id or 'no case'})", style="bold"))
        for a in bad:
            when = f"at {a.decided_at}" if a.decided_at else "at close"
            style = "red" if a.verdict == Verdict.FAIL else "yellow"
            console.print(
                Text.assemble(
                    ("  ✗ " if a.verdict == Verdict.FAIL else "  ! ", style),
                    (f"[{a.index}] {a.type} ", "bold"),
                    (f"({when}) ", "dim"),
                    a.message,
                )
            )
    rejections = RejectionLog(interval_s=float("inf"))  # a finished run: totals at the end
    for rej in report.rejected:
        where = f"{rej.source}:{rej.line}" if rej.line is not None else rej.source
        line = rejections.add(rej.reason, f"rejected {where}: {rej.reason}: {rej.message}")
        if line is not None:
            console.print(Text(line, style="yellow"))
    for line in rejections.totals():
        console.print(Text(line, style="yellow"))
    s = report.summary
    style = "green" if s.ok and not report.rejected else "red"
    console.print(
        Text(
            f"{s.passed} passed, {s.failed} failed, {s.errors} errors, {s.unevaluated} unevaluated "
            f"of {s.episodes} episodes; {s.rejected_signals} rejected, {s.late_signals} late",
            style=style,
        )
    )
    if report.judge is not None:
        console.print(Text(report.judge.summary(), style="dim"))
