"""`evalstream harness run` / `harness report` through the installed CLI: the bundled
examples/eval-harness suite graded end to end from its outputs file and from its `cmd:` agent,
the threshold gate's exit codes, JUnit that parses, human items pending until rated."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.graders.judge_helpers import criteria_of, output_block, verdict
from tests.support.messages_api import MessagesAPIServer, MessagesRequest, Reply

JSON = Any
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "eval-harness"
SUITE = EXAMPLES / "eval-suite.yaml"
OUTPUTS = EXAMPLES / "outputs.json"
AGENT = f"cmd:{sys.executable} {EXAMPLES / 'agent.py'}"
EXE = Path(sys.executable).parent / "evalstream"


def extraction_judge(request: MessagesRequest) -> Reply:
    """5 when the extraction names the database, the path and the variable, else 2."""
    text = output_block(request)
    good = all(s in text for s in ("PostgreSQL 14+", "/api/v1/users", "DATABASE_URL"))
    return Reply.text(verdict(dict.fromkeys(criteria_of(request), 5 if good else 2)))


@pytest.fixture
def judge_env() -> Iterator[dict[str, str]]:
    with MessagesAPIServer(handler=extraction_judge) as server:
        yield {
            **os.environ,
            "ANTHROPIC_API_KEY": "sk-ant-test-key",
            "ANTHROPIC_BASE_URL": server.base_url,
        }


def no_judge_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}


def harness(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env if env is not None else no_judge_env(),
        timeout=180,
        check=False,
    )


def report_of(path: Path) -> dict[str, JSON]:
    data: dict[str, JSON] = json.loads(path.read_text())["eval_report"]
    return data


def statuses(report: dict[str, JSON]) -> dict[str, str]:
    return {item["eval_id"]: item["status"] for item in report["items"]}


def rated_queue(tmp_path: Path) -> Path:
    queue = tmp_path / "reviews.json"
    shutil.copy(EXAMPLES / "reviews.json", queue)
    return queue


def test_the_example_suite_from_its_outputs_file(tmp_path: Path, judge_env: dict[str, str]) -> None:
    junit, result, markdown = tmp_path / "r.xml", tmp_path / "r.json", tmp_path / "r.md"
    done = harness(
        "harness", "run", "--suite", str(SUITE), "--outputs", str(OUTPUTS),
        "--reviews", str(rated_queue(tmp_path)),
        "--report", str(junit), "--report", str(result), "--report", str(markdown),
        env=judge_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout  # pass_at_1 0.852 >= 0.70
    report = report_of(result)
    assert statuses(report) == {
        "cap-string-001/tc-001": "pass",
        "cap-string-001/tc-002": "fail",  # one of three attempts is wrong
        "cap-string-001/tc-003": "pass",
        "cap-codegen-001": "pass",
        "cap-semantic-001": "pass",  # the judge scored it 5
        "cap-review-001": "pass",  # alice 5, bob 4 in the queue
        "reg-api-users-001": "pass",
        "reg-api-001": "pass",
        "reg-quality-001": "fail",  # actionability fell by 0.4 > 0.3
    }
    assert report["metrics"]["pass_at_1"] == pytest.approx(round((7 + 2 / 3) / 9, 3))
    assert report["gate"] == {
        "passed": True,
        "blocking": False,
        "on_failure": "block",
        "rows": [
            {
                "metric": "pass_at_1",
                "value": report["metrics"]["pass_at_1"],
                "threshold": 0.7,
                "passed": True,
                "note": "",
            }
        ],
    }
    root = ET.parse(junit).getroot()
    items, thresholds = root.findall("testsuite")
    assert (items.get("tests"), items.get("failures"), items.get("errors")) == ("9", "2", "0")
    failed = {
        case.get("name") for case in items.iter("testcase") if case.find("failure") is not None
    }
    assert failed == {"cap-string-001/tc-002", "reg-quality-001"}
    assert [c.get("name") for c in thresholds.iter("testcase")] == ["pass_at_1"]
    assert thresholds.get("failures") == "0"
    text = markdown.read_text()
    assert "| pass_at_1 | 0.852 | 0.7 | pass |" in text
    assert "| reg-quality-001 | fail |" in text


def test_a_missed_threshold_blocks_or_warns(tmp_path: Path) -> None:
    common = ("harness", "run", "--suite", str(SUITE), "--outputs", str(OUTPUTS))
    junit = tmp_path / "r.xml"
    blocked = harness(*common, "--threshold", "pass_at_1=0.95", "--report", str(junit))
    assert blocked.returncode == 1, blocked.stderr
    assert "gate FAILED (blocking)" in blocked.stdout
    [threshold] = ET.parse(junit).getroot().findall("testsuite")[1].iter("testcase")
    failure = threshold.find("failure")
    assert failure is not None
    assert "pass_at_1" in (failure.get("message") or "")

    warned = harness(*common, "--threshold", "pass_at_1=0.95", "--on-failure", "warn")
    assert warned.returncode == 0, warned.stderr
    assert "not blocking" in warned.stdout


def test_pass_hat_k_needs_k_attempts_and_says_so(tmp_path: Path) -> None:
    result = tmp_path / "r.json"
    done = harness(
        "harness", "run", "--suite", str(SUITE), "--outputs", str(OUTPUTS),
        "--threshold", "pass_hat_3=0.25", "--threshold", "pass_at_1=0.5", "--report", str(result),
        "--progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout  # the flag overrides the suite's pass_at_1 0.70
    assert "[graded 9/9]" in done.stderr  # asked for; stderr is not a terminal here
    report = report_of(result)
    # only cap-string-001/tc-002 has three attempts (two passed): (2/3)^3 = 0.296
    assert report["metrics"]["pass_hat_3"] == pytest.approx(0.296)
    assert report["metrics_coverage"]["pass_hat_3"]["excluded_fewer_than_k_attempts"] == 8
    rows = {row["metric"]: row for row in report["gate"]["rows"]}
    assert rows["pass_at_1"]["threshold"] == 0.5
    assert "8 items with fewer than 3 attempts left out" in rows["pass_hat_3"]["note"]

    single = harness(
        "harness", "run", "--suite", str(SUITE), "--outputs", str(OUTPUTS),
        "--category", "regression", "--threshold", "pass_at_3=0.5",
    )  # fmt: skip
    assert single.returncode == 1  # no regression item has 3 attempts: undefined fails
    assert "[graded" not in single.stderr  # no progress on a pipe unless asked
    assert "undefined" in single.stdout
    assert "--attempts 3" in single.stdout


def test_the_example_agent_as_a_cmd_target(tmp_path: Path, judge_env: dict[str, str]) -> None:
    result, junit = tmp_path / "r.json", tmp_path / "r.xml"
    done = harness(
        "harness", "run", "--suite", str(SUITE), "--target", AGENT, "--attempts", "3",
        "--reviews", str(rated_queue(tmp_path)),
        "--threshold", "pass_at_1=0.99", "--threshold", "pass_hat_3=0.99",
        "--report", str(result), "--report", str(junit),
        env={**judge_env, "EXAMPLE_AGENT_FAIL": "reg-api-001"},
    )  # fmt: skip
    report = report_of(result)
    status = statuses(report)
    assert status.pop("reg-api-001") == "error"  # the agent crashed on it: never a pass
    assert set(status.values()) == {"pass"}
    crashed = next(i for i in report["items"] if i["eval_id"] == "reg-api-001")
    assert "exited with status 3" in crashed["reason"]
    assert (crashed["attempts"], crashed["passed_attempts"]) == (3, 0)
    # eight items of three attempts, the human one rated once (left out of k = 3)
    assert report["metrics_coverage"]["pass_hat_3"] == {
        "items": 8,
        "excluded_fewer_than_k_attempts": 1,
    }
    assert report["metrics"]["pass_hat_3"] == pytest.approx(0.875)
    assert done.returncode == 1, done.stdout
    errors = [c for c in ET.parse(junit).getroot().iter("testcase") if c.find("error") is not None]
    assert [c.get("name") for c in errors] == ["reg-api-001"]

    healthy = harness(
        "harness", "run", "--suite", str(SUITE), "--target", AGENT, "--attempts", "3",
        "--reviews", str(rated_queue(tmp_path)), "--threshold", "pass_hat_3=0.99",
        env=judge_env,
    )  # fmt: skip
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr


def test_human_items_are_pending_until_rated(tmp_path: Path) -> None:
    queue, result = tmp_path / "queue.json", tmp_path / "r.json"
    run = (
        "harness", "run", "--suite", str(SUITE), "--outputs", str(OUTPUTS),
        "--grader-type", "human", "--reviews", str(queue), "--report", str(result),
    )  # fmt: skip
    first = harness(*run)
    assert first.returncode == 1  # pending is never a pass: pass_at_1 0 < 0.70
    assert "queued 1 items for human review" in first.stdout
    report = report_of(result)
    assert statuses(report) == {"cap-review-001": "pending"}
    assert (report["summary"]["passed"], report["summary"]["pending"]) == (0, 1)
    assert report["metrics"]["pass_at_1"] == 0.0
    saved = json.loads(queue.read_text())
    assert [item["id"] for item in saved["items"]] == ["cap-review-001"]

    for rater, rating in (("alice", "5"), ("bob", "4")):
        rated = harness("review", "rate", str(queue), "--rater", rater, stdin=f"{rating}\n")
        assert rated.returncode == 0, rated.stderr
        still = harness(*run)
        expected = "pending" if rater == "alice" else "pass"  # min_required is 2
        assert statuses(report_of(result)) == {"cap-review-001": expected}
        assert still.returncode == (1 if rater == "alice" else 0)
    xml = harness("harness", "report", "--results", str(result), "--format", "junit")
    [case] = ET.fromstring(xml.stdout).findall("testsuite")[0].iter("testcase")
    assert case.find("skipped") is None
    assert case.find("failure") is None


def test_report_re_renders_a_saved_result(tmp_path: Path) -> None:
    result, junit, markdown = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.md"
    harness(
        "harness", "run", "--suite", str(SUITE), "--outputs", str(OUTPUTS),
        "--report", str(result), "--report", str(junit), "--report", str(markdown),
    )  # fmt: skip
    for fmt, written in (("junit", junit), ("md", markdown)):
        again = harness("harness", "report", "--results", str(result), "--format", fmt)
        assert again.returncode == 0, again.stderr
        assert again.stdout == written.read_text()
    out = tmp_path / "again.xml"
    assert harness("harness", "report", "--results", str(result), "-o", str(out)).returncode == 0
    assert out.read_text() == junit.read_text()  # the format follows --out's suffix
    # without a review queue the human item is pending, and JUnit says so (not a pass)
    pending = [
        c
        for c in ET.parse(junit).getroot().iter("testcase")
        if (s := c.find("skipped")) is not None and (s.get("message") or "").startswith("pending")
    ]
    assert [c.get("name") for c in pending] == ["cap-review-001"]


def test_rubric_on_another_scale_is_a_warning(tmp_path: Path) -> None:
    suite = tmp_path / "evals.yaml"
    suite.write_text(
        "- id: summary\n  grader:\n    type: model\n    config:\n"
        "      rubric: 'Rate the summary on a 0-5 scale: 0 is empty, 5 is complete.'\n"
    )
    result = tmp_path / "r.json"
    done = harness(
        "harness", "run", "--suite", str(suite), "--outputs", "/dev/null",
        "--report", str(result),
    )  # fmt: skip
    assert done.returncode == 2  # /dev/null is not a JSON object: input error
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"summary": "a summary"}))
    done = harness(
        "harness", "run", "--suite", str(suite), "--outputs", str(outputs),
        "--report", str(result),
    )  # fmt: skip
    assert "0-5 scale" in done.stderr
    [warning] = report_of(result)["warnings"]
    assert "scores on 1-5 (the default range)" in warning
    assert "range: [0, 5]" in warning


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--suite", str(SUITE)), "exactly one of --target"),
        (("--suite", str(SUITE), "--outputs", str(OUTPUTS), "--target", AGENT), "exactly one"),
        (("--suite", "nope.yaml", "--outputs", str(OUTPUTS)), "cannot read eval file"),
        (
            ("--suite", str(SUITE), "--outputs", str(OUTPUTS), "--threshold", "pass_at1=0.5"),
            "unknown metric 'pass_at1'",
        ),
        (
            ("--suite", str(SUITE), "--outputs", str(OUTPUTS), "--threshold", "pass_at_1=85"),
            "between 0 and 1",
        ),
        (
            ("--suite", str(SUITE), "--outputs", str(OUTPUTS), "--report", "out.txt"),
            "cannot tell the format",
        ),
        (
            ("--suite", str(SUITE), "--outputs", str(OUTPUTS), "--category", "codegen"),
            "category 'codegen' matches no item",
        ),
        (("--suite", str(SUITE), "--outputs", str(OUTPUTS), "--attempts", "0"), "at least 1"),
    ],
)
def test_usage_and_input_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    done = harness("harness", "run", *args)
    assert done.returncode == 2, done.stdout
    assert message in done.stderr


def test_a_bad_eval_trigger_names_the_line(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    shutil.copytree(EXAMPLES / "capability", tmp_path / "capability")
    suite.write_text(
        "eval_suite:\n  name: s\n  evals:\n    - $ref: capability/string-processing.yaml\n"
        "eval_trigger:\n  pass_at_one: 0.9\n"
    )
    done = harness("harness", "run", "--suite", str(suite), "--outputs", str(OUTPUTS))
    assert done.returncode == 2
    assert "unknown metric 'pass_at_one'" in done.stderr
    assert f"{suite}:6:3" in done.stderr  # the offending key


def test_report_of_something_else_is_an_input_error(tmp_path: Path) -> None:
    other = tmp_path / "x.json"
    other.write_text('{"name": "a dataset run"}')
    done = harness("harness", "report", "--results", str(other))
    assert done.returncode == 2
    assert "not a harness result" in done.stderr


def test_code_graders_need_the_sandbox_or_an_explicit_opt_out(tmp_path: Path) -> None:
    """Without bwrap on PATH the function_output item is refused (exit 2, naming the fix);
    `--no-sandbox` runs it unconfined and says so; with bwrap the grade says `bwrap`."""
    common = ("harness", "run", "--suite", str(SUITE), "--outputs", str(OUTPUTS))
    code_only = ("--grader-type", "code", "--threshold", "pass_at_1=0")
    no_bwrap = {**no_judge_env(), "PATH": str(tmp_path)}
    refused = harness(*common, *code_only, env=no_bwrap)
    assert refused.returncode == 2, refused.stderr + refused.stdout
    assert "install bubblewrap" in refused.stderr
    assert "--no-sandbox" in refused.stderr

    result = tmp_path / "off.json"
    opted_out = harness(*common, *code_only, "--no-sandbox", "--report", str(result), env=no_bwrap)
    assert opted_out.returncode == 0, opted_out.stderr + opted_out.stdout
    assert "the sandbox is off" in opted_out.stderr
    assert report_of(result)["metadata"]["environment"]["sandbox"] == "off"

    if shutil.which("bwrap") is not None:
        result = tmp_path / "bwrap.json"
        sandboxed = harness(*common, *code_only, "--report", str(result))
        assert sandboxed.returncode == 0, sandboxed.stderr + sandboxed.stdout
        assert report_of(result)["metadata"]["environment"]["sandbox"] == "bwrap"
