"""The HTML report in a real browser: headless Chromium renders it and its DOM shows the
numbers (cards, SVG charts, tables) and the inline script ran."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from evalstream.assertions.evalruns.compare import compare
from evalstream.assertions.evalruns.reports import render_eval_report
from evalstream.assertions.suite_format.suites import Suite
from evalstream.connectors.targets.spec import parse_target
from evalstream.stream.evalruns.runner import run_dataset
from tests.evals.conftest import AGENT, HASTY


class Dom(HTMLParser):
    """Texts by element id, texts of SVG <text> elements, and attributes of <body>."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, str] = {}
        self.svg_texts: list[str] = []
        self.body: dict[str, str | None] = {}
        self._stack: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self.body = dict(attrs)
        self._stack.append((tag, dict(attrs).get("id")))
        if tag in {"meta", "br", "rect", "line"}:
            self._stack.pop()

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            if self._stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, ident in self._stack:
            if ident:
                self.by_id[ident] = self.by_id.get(ident, "") + data
        if self._stack and self._stack[-1][0] == "text":
            self.svg_texts.append(data)


def render_in_chromium(html: str, tmp_path: Path) -> Dom:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "headless Chromium is needed (scripts/system-deps.sh installs it)"
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    done = subprocess.run(
        [browser, "--headless", "--disable-gpu", "--no-sandbox", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = Dom()
    dom.feed(done.stdout)
    return dom


@pytest.fixture(scope="module")
def two_runs() -> tuple[object, object]:
    from evalstream.assertions.suite_format.suites import load_suite  # noqa: PLC0415 - module fixture, no per-test cost
    from tests.evals.conftest import EXAMPLE  # noqa: PLC0415

    suite: Suite = load_suite(EXAMPLE / "dataset.yaml")
    base = asyncio.run(run_dataset(suite, parse_target(AGENT)))
    hasty = asyncio.run(run_dataset(suite, parse_target(AGENT), config=HASTY, variant_id="hasty"))
    return base, hasty


def test_dataset_report_shows_its_numbers(two_runs: tuple[object, object], tmp_path: Path) -> None:
    _, hasty = two_runs
    dom = render_in_chromium(render_eval_report(hasty, "html"), tmp_path)
    assert dom.body.get("data-enhanced") == "yes"  # the inline script ran
    assert dom.by_id["pass-rate"] == "70.0%"
    assert dom.by_id["cases-passed"] == "7/10"
    assert dom.by_id["rows-shown"] == "11 case rows"
    texts = dom.svg_texts
    assert "Pass rate by case" in texts
    assert "0.0% (0/1)" in texts  # refund-small's bar
    assert "Pass rate by category" in texts
    assert "0.0% (0/3)" in texts  # the refunds category
    assert "100.0% (2/2)" in texts  # knowledge
    assert "10 sample(s)" in texts  # latency and cost histograms
    total = hasty.aggregate_metrics.total_cost  # type: ignore[attr-defined]
    assert dom.by_id["total-cost"] == f"${total:.6f}"
    assert "pass^3 (eval-harness)" in dom.by_id["metrics"]
    assert "undefined (n < k)" in dom.by_id["metrics"]


def test_comparison_report_shows_baseline_vs_candidate(
    two_runs: tuple[object, object], tmp_path: Path
) -> None:
    base, hasty = two_runs
    comparison = compare(base, hasty)  # type: ignore[arg-type]
    dom = render_in_chromium(render_eval_report(comparison, "html"), tmp_path)
    assert dom.by_id["baseline-pass-rate"] == "100.0%"
    assert dom.by_id["candidate-pass-rate"] == "70.0%"
    assert "Verdict: worse" in dom.by_id["gate"]
    assert "BLOCKS" in dom.by_id["gate"]
    assert "refund-small" in dom.by_id["gate"]
    assert "Pass rate by case: baseline vs candidate" in dom.svg_texts
    assert "100.0% → 0.0%" in dom.svg_texts
    assert "tool.sequence" in dom.by_id["regressions"]
