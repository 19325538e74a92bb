"""The pure pieces of `harness run`: one rule for pass@k and pass^k, thresholds and the gate,
JUnit rendering, selection and the rubric-scale check."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from pydantic import ValidationError

from evalstream.assertions.errors import SuiteError
from evalstream.assertions.graders.exact_match import ExactMatchConfig
from evalstream.assertions.graders.model import ModelGraderConfig
from evalstream.assertions.graders.result import GradeResult
from evalstream.assertions.harness.grading import ItemGrade, grade_items
from evalstream.assertions.harness.junit import render_junit
from evalstream.assertions.harness.loader import load_evals
from evalstream.assertions.harness.models import EvalItem
from evalstream.assertions.harness.report import build_report
from evalstream.assertions.harness.scale_check import rubric_scale, scale_warning
from evalstream.assertions.harness.selection import select_items
from evalstream.assertions.harness.thresholds import (
    EvalTrigger,
    evaluate_gate,
    ks_needed,
    parse_threshold_flag,
)
from evalstream.assertions.judge.protocol import JudgeRequest, JudgeVerdict

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "eval-harness"
PASS, FAIL = GradeResult(passed=True, score=1.0), GradeResult(passed=False, score=0.0)


def item(key: str, **fields: object) -> EvalItem:
    values: dict[str, object] = {
        "eval_id": key,
        "eval_type": "capability",
        "grader_type": "code",
        "grader": ExactMatchConfig(),
        **fields,
    }
    return EvalItem.model_validate(values)


def graded(key: str, *attempts: GradeResult) -> ItemGrade:
    return ItemGrade(item(key), list(attempts))


def test_items_with_fewer_than_k_attempts_are_left_out_of_pass_at_k_and_pass_hat_k() -> None:
    grades = [
        graded("three", PASS, PASS, FAIL),  # n = 3, c = 2
        graded("two", PASS, PASS),  # n = 2 < 3: out of both k = 3 metrics
        graded("one", FAIL),
    ]
    r = build_report(grades, suite_name="s", run_id="r", timestamp="t", ks=(3,))["eval_report"]
    assert r["metrics"]["pass_at_3"] == 1.0  # 1 - C(1, 3) / C(3, 3)
    assert r["metrics"]["pass_hat_3"] == pytest.approx(round((2 / 3) ** 3, 3))
    assert r["metrics"]["pass_at_1"] == pytest.approx(round((2 / 3 + 1 + 0) / 3, 3))
    for name in ("pass_at_3", "pass_hat_3"):
        assert r["metrics_coverage"][name] == {"items": 1, "excluded_fewer_than_k_attempts": 2}


def test_errored_attempts_and_pending_items_never_count_as_passes() -> None:
    errored = graded("e", PASS, GradeResult.errored("judge down"))
    pending = ItemGrade(item("h", grader_type="human"), pending="awaiting human review")
    skipped = ItemGrade(item("s"), skipped="no output")
    r = build_report([errored, pending, skipped], suite_name="s", run_id="r", timestamp="t")
    report = r["eval_report"]
    assert report["summary"]["pass_rate"] == 0.0  # skipped left out, the other two not passed
    assert report["metrics"]["pass_at_1"] == pytest.approx(round((1 / 2 + 0) / 2, 3))
    assert report["metrics_coverage"]["pass_at_1"]["items"] == 2


def test_trigger_thresholds_flat_or_nested_and_checked() -> None:
    trigger = EvalTrigger.model_validate(
        {"pass_at_1": 0.85, "thresholds": {"pass_hat_3": 0.7}, "on": ["pull_request"]}
    )
    assert trigger.thresholds == {"pass_at_1": 0.85, "pass_hat_3": 0.7}
    assert trigger.on_failure == "block"
    with pytest.raises(ValidationError, match="unknown metric 'pass_hat3'"):
        EvalTrigger.model_validate({"pass_hat3": 0.7})
    with pytest.raises(ValidationError, match="between 0 and 1"):
        EvalTrigger.model_validate({"pass_at_1": 85})
    with pytest.raises(ValidationError, match="on_failure"):
        EvalTrigger.model_validate({"on_failure": "explode"})
    assert parse_threshold_flag("pass_rate=0.9") == ("pass_rate", 0.9)
    with pytest.raises(ValueError, match="METRIC=MINIMUM"):
        parse_threshold_flag("pass_at_1")
    assert ks_needed({"pass_at_1": 0.8, "pass_hat_5": 0.5}, attempts=3) == [3, 5]
    assert ks_needed({}, attempts=1) == [3]


def test_an_undefined_metric_fails_its_threshold() -> None:
    report = build_report([graded("one", PASS)], suite_name="s", run_id="r", timestamp="t")
    gate = evaluate_gate(report, {"pass_at_1": 0.5, "pass_hat_3": 0.5}, "warn")
    rows = {row.metric: row for row in gate.rows}
    assert rows["pass_at_1"].passed
    assert not rows["pass_hat_3"].passed
    assert "--attempts 3" in rows["pass_hat_3"].note
    assert (gate.passed, gate.blocking) == (False, False)  # warn: reported, not blocking
    assert evaluate_gate(report, {"pass_hat_3": 0.5}).blocking


def test_junit_marks_failures_errors_and_pending() -> None:
    grades = [
        graded("ok", PASS),
        graded("bad", FAIL),
        graded("broken", GradeResult.errored("boom")),
        ItemGrade(item("human", grader_type="human"), pending="awaiting human review"),
    ]
    report = build_report(grades, suite_name="s & co", run_id="r", timestamp="t")
    report["eval_report"]["gate"] = evaluate_gate(report, {"pass_rate": 0.9}).to_json()
    root = ET.fromstring(render_junit(report))
    items, gate = root.findall("testsuite")
    assert items.get("name") == "s & co"
    assert [items.get(k) for k in ("tests", "failures", "errors", "skipped")] == [
        "4",
        "1",
        "1",
        "1",
    ]
    kinds = {case.get("name"): [child.tag for child in case] for case in items.iter("testcase")}
    assert kinds == {"ok": [], "bad": ["failure"], "broken": ["error"], "human": ["skipped"]}
    [row] = gate.iter("testcase")
    assert row.find("failure") is not None


def test_selection_filters_and_names_unknown_values() -> None:
    items = load_evals(EXAMPLES / "eval-suite.yaml").items
    regression = select_items(items, categories=["regression"])
    assert {i.key for i in regression} == {"reg-api-users-001", "reg-api-001", "reg-quality-001"}
    tagged = select_items(items, tags=["strings"], grader_types=["code"])
    assert {i.key for i in tagged} == {f"cap-string-001/tc-00{n}" for n in (1, 2, 3)}
    with pytest.raises(ValueError, match=r"tags in the suite: .*recursion"):
        select_items(items, tags=["recursive"])


@pytest.mark.parametrize(
    ("rubric", "scale"),
    [
        ("Rate the answer on a 0-5 scale.", (0, 5)),
        ("Score from 0 to 10.", (0, 10)),
        ("0: nothing relevant\n3: partly\n5: complete", (0, 5)),
        ("Score it 1\u20135.", (1, 5)),
        ("1. Completeness: all items?\n2. Accuracy: correct?\n3. Relevance?", None),
        ("Needs PostgreSQL 14+ (2024-01-15 spec); score the extraction.", None),
    ],
)
def test_rubric_scale(rubric: str, scale: tuple[int, int] | None) -> None:
    assert rubric_scale(rubric) == scale


def test_scale_mismatch_is_flagged_not_rescaled() -> None:
    default = ModelGraderConfig(rubric="Rate on a 0-5 scale.")
    warning = scale_warning("x", default)
    assert warning is not None
    assert "the default range" in warning
    assert default.scoring.range == (1, 5)  # left as configured
    fixed = ModelGraderConfig.model_validate(
        {"rubric": "Rate on a 0-5 scale.", "scoring": {"range": [0, 5]}}
    )
    assert scale_warning("x", fixed) is None
    assert scale_warning("x", ModelGraderConfig(rubric="Is it correct?")) is None


def test_eval_trigger_beside_the_suite(tmp_path: Path) -> None:
    (tmp_path / "e.yaml").write_text(
        "- id: x\n  grader:\n    type: code\n    config:\n      method: exact_match\n"
    )
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "eval_suite:\n  name: s\n  evals:\n    - $ref: e.yaml\n"
        "eval_trigger:\n  thresholds:\n    pass_rate: 0.5\n  on_failure: warn\n"
    )
    loaded = load_evals(suite)
    assert loaded.suite is not None
    assert loaded.suite.eval_trigger == EvalTrigger(
        thresholds={"pass_rate": 0.5}, on_failure="warn"
    )
    suite.write_text(suite.read_text().replace("warn", "sometimes"))
    with pytest.raises(SuiteError, match="on_failure") as caught:
        load_evals(suite)
    assert caught.value.line == 8


class CountingJudge:
    """Holds each request until several are in flight, recording the peak: the pool's bound."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.calls = 0

    async def judge(self, request: JudgeRequest) -> JudgeVerdict:
        self.in_flight += 1
        self.calls += 1
        self.peak = max(self.peak, self.in_flight)
        for _ in range(20):  # let every other ready attempt start, if the pool allows it
            await asyncio.sleep(0)
        self.in_flight -= 1
        return JudgeVerdict(score=1.0)


@pytest.mark.parametrize("pool", [1, 3])
def test_model_graded_attempts_run_in_a_bounded_pool(pool: int) -> None:
    items = [
        item(f"m{i}", grader_type="model", grader=ModelGraderConfig(rubric="Is it right?"))
        for i in range(4)
    ]
    outputs = {i.key: {"attempts": ["a", "b"]} for i in items}
    judge = CountingJudge()
    grades = asyncio.run(grade_items(items, outputs, judge=judge, max_concurrency=pool))
    assert judge.calls == 8
    assert judge.peak == pool  # parallel up to the bound, never beyond
    assert {g.status for g in grades} == {"pass"}


def test_an_empty_attempts_list_is_no_output() -> None:
    [grade] = asyncio.run(grade_items([item("x", expected="a")], {"x": {"attempts": []}}))
    assert (grade.status, grade.reason()) == ("skipped", "no output for 'x'")
