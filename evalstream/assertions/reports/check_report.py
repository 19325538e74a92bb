"""The result of an offline check run, and its JSON, Markdown and JUnit renderings."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

import orjson

from evalstream.assertions.evaluation.results import EpisodeResult, Summary
from evalstream.assertions.evaluation.verdicts import Verdict
from evalstream.assertions.judge.usage import JudgeUsage

JSON = Any


@dataclass(frozen=True)
class RejectedInput:
    source: str
    line: int | None
    reason: str
    message: str

    def to_json(self) -> dict[str, JSON]:
        return {
            "source": self.source,
            "line": self.line,
            "reason": self.reason,
            "message": self.message,
        }


@dataclass
class CheckReport:
    results: list[EpisodeResult]
    rejected: list[RejectedInput] = field(default_factory=list)
    unknown_cases: list[str] = field(default_factory=list)
    judge: JudgeUsage | None = None
    """What the LLM judge used in this run (None: no judge that counts, or never asked)."""

    @property
    def summary(self) -> Summary:
        s = Summary.of(self.results)
        s.rejected_signals = sum(1 for r in self.rejected if r.reason != "late")
        s.late_signals = sum(1 for r in self.rejected if r.reason == "late")
        return s

    def nothing_evaluated(self) -> str | None:
        """Why no episode was evaluated, naming the likely cause; None when one was.

        An empty recording, or a `match:` / `case_id` that selects nothing, would otherwise
        report "0 failed" and pass a gate it never ran.
        """
        s = self.summary
        if s.passed or s.failed or s.errors:
            return None
        if not s.episodes:
            cause = "the input holds no episode (an empty file or stdin?)"
            if self.rejected:
                cause = f"no valid signal: {len(self.rejected)} line(s) were rejected"
        else:
            cause = f"{s.episodes} episode(s), none with an applicable assertion: "
            if self.unknown_cases:
                cause += (
                    f"case_id(s) {', '.join(map(repr, self.unknown_cases))} match no case of "
                    "the suites (a typo in a case_id?), or "
                )
            attrs = self.results[0].attrs
            shown = ", ".join(f"{k}={v!r}" for k, v in sorted(attrs.items())[:6]) or "none"
            cause += (
                "no suite's `match:` selects them (check it against the episodes' attrs; the "
                f"first has {shown})"
            )
        return f"nothing was evaluated: {cause}; pass --allow-empty if that is expected"

    def exit_code(self, *, allow_empty: bool = False) -> int:
        """0 all passed; 1 a failure or error verdict; 2 input that could not be evaluated,
        or that evaluated nothing (unless `allow_empty`)."""
        if self.rejected:
            return 2
        if not allow_empty and self.nothing_evaluated() is not None:
            return 2
        return 0 if self.summary.ok else 1

    def to_json(self) -> dict[str, JSON]:
        out = {
            "episodes": [r.to_json() for r in self.results],
            "summary": self.summary.to_json(),
            "rejected": [r.to_json() for r in self.rejected],
        }
        if self.judge is not None:
            out["judge"] = self.judge.to_json()
        return out


def render_json(report: CheckReport) -> str:
    return orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: CheckReport) -> str:
    s = report.summary
    lines = [
        "# evalstream check",
        "",
        f"**{s.passed}/{s.episodes} episodes passed** — {s.failed} failed, {s.errors} with errors, "
        f"{s.unevaluated} unevaluated, {s.rejected_signals} rejected signals, "
        f"{s.late_signals} late signals.",
        *(["", f"{_cell(report.judge.summary())}."] if report.judge is not None else []),
        "",
        "| episode | case | status | close | signals | assertions |",
        "|---|---|---|---|---|---|",
    ]
    for r in report.results:
        ok = sum(1 for a in r.assertions if a.verdict == Verdict.PASS)
        lines.append(
            f"| {_cell(r.episode_id)} | {_cell(r.case_id or '—')} | {r.status} | {r.close_reason} "
            f"| {r.signals} | {ok}/{len(r.assertions)} |"
        )
    failing = [r for r in report.results if r.status in ("failed", "error")]
    if failing:
        lines += ["", "## Failures", ""]
        for r in failing:
            lines.append(f"### {r.episode_id} ({r.case_id or 'no case'})")
            lines.append("")
            for a in r.assertions:
                if a.verdict != Verdict.PASS:
                    when = f" at signal `{a.decided_at}`" if a.decided_at else " at close"
                    lines.append(
                        f"- **{a.verdict.value}** [{a.index}] `{a.type}`{when}: {_cell(a.message)}"
                    )
            lines.append("")
    if report.rejected:
        lines += ["", "## Rejected input", ""]
        lines += [
            f"- `{r.source}:{r.line}` {r.reason}: {_cell(r.message)}" for r in report.rejected[:50]
        ]
    return "\n".join(lines).rstrip() + "\n"


def render_junit(report: CheckReport) -> str:
    s = report.summary
    root = ET.Element(
        "testsuites",
        name="evalstream",
        tests=str(s.episodes),
        failures=str(s.failed),
        errors=str(s.errors + s.rejected_signals),
    )
    by_suite: dict[str, list[EpisodeResult]] = {}
    for r in report.results:
        by_suite.setdefault(", ".join(r.suites) or "(no suite)", []).append(r)
    for suite_name, results in by_suite.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=suite_name,
            tests=str(len(results)),
            failures=str(sum(1 for r in results if r.status == "failed")),
            errors=str(sum(1 for r in results if r.status == "error")),
        )
        for r in results:
            case = ET.SubElement(
                suite, "testcase", classname=r.case_id or "episode", name=r.episode_id
            )
            bad = [a for a in r.assertions if a.verdict != Verdict.PASS]
            text = "\n".join(f"[{a.index}] {a.type}: {a.verdict.value}: {a.message}" for a in bad)
            if r.status == "failed":
                ET.SubElement(
                    case, "failure", message=f"{len(bad)} assertion(s) did not pass"
                ).text = text
            elif r.status == "error":
                ET.SubElement(
                    case, "error", message="assertion(s) could not be evaluated"
                ).text = text
            elif r.status == "unevaluated":
                ET.SubElement(case, "skipped", message="no assertion applies to this episode")
    if report.rejected:
        suite = ET.SubElement(
            root,
            "testsuite",
            name="input",
            tests=str(len(report.rejected)),
            errors=str(len(report.rejected)),
        )
        for rej in report.rejected:
            case = ET.SubElement(
                suite, "testcase", classname="input", name=f"{rej.source}:{rej.line}"
            )
            ET.SubElement(case, "error", message=rej.reason).text = rej.message
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
