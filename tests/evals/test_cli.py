"""The commands as a CI uses them: eval, compare (the gate), matrix, eval-report, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.evals.conftest import EXAMPLE, REPO, Run

DATASET = str(EXAMPLE / "dataset.yaml")
AGENT = "examples/agent/support_agent.py:run"
HASTY = [
    "--config",
    "verify_orders=false",
    "--config",
    "refund_limit=null",
    "--config",
    "responder_model=claude-opus-4-1",
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The baseline and the regressing variant, each run once by the real command."""
    out = tmp_path_factory.mktemp("runs")
    exe = str(Path(sys.executable).parent / "evalstream")
    paths = {"base": out / "base.json", "hasty": out / "hasty.json"}
    for name, extra in (("base", []), ("hasty", [*HASTY, "--variant-id", "hasty"])):
        done = subprocess.run(
            [
                exe,
                "eval",
                DATASET,
                "--target",
                AGENT,
                "--no-progress",
                "--repeat",
                "3",
                "--out",
                str(paths[name]),
                *extra,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == (0 if name == "base" else 1), done.stderr
    return paths


def test_eval_gate_exit_codes_and_summary(runs: dict[str, Path]) -> None:
    base = json.loads(runs["base"].read_text())
    hasty = json.loads(runs["hasty"].read_text())
    assert base["kind"] == "evalstream.dataset-run"
    assert (base["passedCases"], base["skippedCases"], base["passRate"]) == (10, 1, 1.0)
    assert base["passMetrics"]["passAtK"] == 1.0  # defined: 3 samples per case, k = 3
    assert (hasty["failedCases"], hasty["variantId"]) == (3, "hasty")


def test_compare_blocks_the_regressing_variant_with_a_clear_reason(
    evalstream: Run, runs: dict[str, Path], tmp_path: Path
) -> None:
    done = evalstream(
        "compare",
        str(runs["base"]),
        str(runs["hasty"]),
        "--out",
        str(tmp_path / "cmp.json"),
        "--report",
        str(tmp_path / "cmp.xml"),
    )
    assert done.returncode == 1, done.stderr
    assert "BLOCKED: 3 critical regression(s)" in done.stderr
    assert "refund-small (pass rate 3/3 → 0/3" in done.stderr
    assert "tool.sequence fail: matched 0 of 2 tools in order; missing lookup_order" in done.stderr
    assert "**Verdict: worse**" in done.stdout
    cmp_ = json.loads((tmp_path / "cmp.json").read_text())
    assert cmp_["summary"]["shouldBlock"] is True
    critical = {r["caseId"] for r in cmp_["regressions"] if r["severity"] == "critical"}
    assert critical == {"refund-small", "refund-large-escalates", "refund-already-refunded"}
    junit = ET.parse(tmp_path / "cmp.xml").getroot()
    failed = {tc.get("name") for tc in junit.iter("testcase") if tc.find("failure") is not None}
    assert failed == {"gate", *critical}


def test_compare_passes_an_equal_run_and_warning_level_catches_cost(
    evalstream: Run, runs: dict[str, Path]
) -> None:
    same = evalstream("compare", str(runs["base"]), str(runs["base"]), "--fail-on", "warning")
    assert same.returncode == 0, same.stderr
    assert "**Verdict: equivalent**" in same.stdout
    reverse = evalstream("compare", str(runs["hasty"]), str(runs["base"]), "--fail-on", "warning")
    assert reverse.returncode == 0, reverse.stderr  # the fix is an improvement
    assert "**Verdict: better**" in reverse.stdout


def test_compare_refuses_runs_of_different_datasets(
    evalstream: Run, runs: dict[str, Path], tmp_path: Path
) -> None:
    base = json.loads(runs["base"].read_text())
    assert base["datasetFingerprint"].startswith("sha256:")
    renamed = tmp_path / "renamed.json"
    renamed.write_text(json.dumps(base | {"name": "another-dataset"}))
    done = evalstream("compare", str(runs["base"]), str(renamed))
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("error: the baseline and the candidate ran different datasets")
    assert f"dataset {base['name']!r} vs 'another-dataset'" in done.stderr
    assert "Traceback" not in done.stderr
    fewer = tmp_path / "fewer.json"
    fewer.write_text(json.dumps(base | {"cases": base["cases"][:4]}))
    done = evalstream("compare", str(runs["base"]), str(fewer))
    assert done.returncode == 2
    assert "cases only in the baseline: " in done.stderr
    # Records of older versions have no fingerprint: the case ids decide, and they agree.
    old = tmp_path / "old.json"
    old.write_text(json.dumps({k: v for k, v in base.items() if k != "datasetFingerprint"}))
    assert evalstream("compare", str(old), str(runs["base"])).returncode == 0


def test_compare_blocks_a_candidate_that_left_baseline_cases_out(
    evalstream: Run, runs: dict[str, Path], tmp_path: Path
) -> None:
    subset = tmp_path / "subset.json"
    ran = evalstream(
        "eval",
        DATASET,
        "--target",
        AGENT,
        "--case",
        "refund-small",
        "--no-progress",
        "--out",
        str(subset),
    )
    assert ran.returncode == 0, ran.stderr
    done = evalstream("compare", str(runs["base"]), str(subset))
    assert done.returncode == 1, done.stdout
    assert "BLOCKED: 9 of the baseline's 10 evaluated case(s) were not evaluated" in done.stderr
    assert "--allow-removed" in done.stderr
    assert "were not evaluated in the candidate" in done.stdout  # the report says why
    allowed = evalstream("compare", str(runs["base"]), str(subset), "--allow-removed")
    assert allowed.returncode == 0, allowed.stderr
    gated = evalstream(
        "eval",
        DATASET,
        "--target",
        AGENT,
        "--case",
        "refund-small",
        "--no-progress",
        "--baseline",
        str(runs["base"]),
    )
    assert gated.returncode == 1
    assert "BLOCKS: 9 of the baseline's 10" in gated.stdout


def test_eval_with_baseline_and_profile(evalstream: Run, runs: dict[str, Path]) -> None:
    done = evalstream(
        "eval",
        DATASET,
        "--target",
        AGENT,
        "--no-progress",
        *HASTY,
        "--baseline",
        str(runs["base"]),
        "--profile",
        "development",
    )
    assert done.returncode == 1
    assert "BLOCKS: 3 critical regression(s)" in done.stdout
    assert "threshold profile development:" in done.stdout
    assert "pass@1: 0.700 vs 0.7 -> pass" in done.stdout
    assert "pass@3: undefined" in done.stdout


def test_eval_report_formats(evalstream: Run, runs: dict[str, Path], tmp_path: Path) -> None:
    md = evalstream("eval-report", str(runs["hasty"]), "--format", "md")
    assert md.returncode == 0
    assert "**7/10 evaluated cases passed — pass rate 70.0%**" in md.stdout
    assert "✗ `tool.sequence` (fail)" in md.stdout
    js = json.loads(evalstream("eval-report", str(runs["hasty"]), "-f", "json").stdout)
    assert js["of"] == "dataset-run"
    assert {r["category"]: r["passed"] for r in js["byCategory"]}["refunds"] == 0
    junit = evalstream("eval-report", str(runs["hasty"]), "-f", "junit").stdout
    suite = ET.fromstring(junit).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("11", "3", "1")
    bad = tmp_path / "other.json"
    bad.write_text('{"kind": "episode-store-score"}')
    err = evalstream("eval-report", str(bad))
    assert err.returncode == 2
    assert "not an eval-run document (kind 'episode-store-score')" in err.stderr


def test_matrix_ranks_variants_and_gates_on_request(evalstream: Run, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    done = evalstream(
        "matrix",
        DATASET,
        "--variants",
        str(EXAMPLE / "variants.yaml"),
        "--no-progress",
        "--out",
        str(out),
        "--fail-on",
        "critical",
    )
    assert done.returncode == 1, done.stderr
    assert "hasty vs v1: worse; BLOCKS: 3 critical regression(s)" in done.stdout
    assert "lean vs v1: better; does not block" in done.stdout
    m = json.loads(out.read_text())
    assert m["comparison"]["byPassRate"][-1] == "hasty"
    assert m["comparison"]["byCost"][0] == "lean"
    assert m["recommendation"]["variantId"] == "lean"
    # One variant of a matrix run is a run the compare command accepts.
    pick = evalstream("compare", f"{out}#v1", f"{out}#hasty")
    assert pick.returncode == 1


def test_user_errors_exit_2_with_one_line(evalstream: Run) -> None:
    bad_target = evalstream("eval", DATASET, "--target", "examples/agent/support_agent.py:nope")
    assert bad_target.returncode == 2
    assert "has no callable 'nope'" in bad_target.stderr
    assert "Traceback" not in bad_target.stderr
    bad_case = evalstream("eval", DATASET, "--target", AGENT, "--case", "refund-smal")
    assert bad_case.returncode == 2
    assert "unknown case id(s) 'refund-smal'" in bad_case.stderr
    bad_report = evalstream("eval", DATASET, "--target", AGENT, "--report", "out.pdf")
    assert bad_report.returncode == 2
    assert "cannot tell the format from the extension" in bad_report.stderr


def test_ctrl_c_keeps_the_finished_cases(tmp_path: Path) -> None:
    dataset = tmp_path / "slow.yaml"
    started = tmp_path / "c2-started"
    cases = "\n".join(
        f"  - id: c{i}\n    input: {{name: c{i}, sleep: {0 if i < 2 else 60}, "
        f"marker: {str(started) if i == 2 else ''!r}}}\n"
        "    assertions: [{type: output.contains, text: finished}]"
        for i in range(4)
    )
    dataset.write_text(f"name: slow\ncases:\n{cases}\n")
    out = tmp_path / "partial.json"
    exe = str(Path(sys.executable).parent / "evalstream")
    proc = subprocess.Popen(
        [
            exe,
            "eval",
            str(dataset),
            "--target",
            "tests.evals.targets_for_tests:slow_async",
            "--concurrency",
            "1",
            "--out",
            str(out),
            "--no-progress",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        # c0 and c1 finish at once; c2 sleeps a minute. Ctrl-C once c2 has started.
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted: the finished cases were kept" in stderr
    result = json.loads(out.read_text())
    assert result["interrupted"] is True
    statuses = [c["status"] for c in result["cases"]]
    assert statuses[:2] == ["passed", "passed"]
    assert statuses[2:] == ["skipped", "skipped"]
    assert "2/2 cases passed" in stdout


def test_report_renders_dataset_runs_too(evalstream: Run, runs: dict[str, Path]) -> None:
    """`evalstream report` takes every results file: here a dataset run, in all formats."""
    md = evalstream("report", str(runs["hasty"]))
    assert md.returncode == 0, md.stderr
    assert "**7/10 evaluated cases passed — pass rate 70.0%**" in md.stdout
    junit = evalstream("report", str(runs["hasty"]), "-f", "junit").stdout
    suite = ET.fromstring(junit).find("testsuite")
    assert suite is not None
    assert suite.get("failures") == "3"
    html = evalstream("report", str(runs["hasty"]), "-f", "html")
    assert html.returncode == 0
    assert html.stdout.lstrip().lower().startswith("<!doctype html>")
