"""The eval-harness eval files (YAML and JSON, suites with $ref) loaded, graded and reported."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalstream.assertions.errors import SuiteError
from evalstream.assertions.graders import (
    ExactMatchConfig,
    FunctionOutputConfig,
    ModelGraderConfig,
    RegexConfig,
    StructuralConfig,
)
from evalstream.assertions.graders.human_review import HumanGraderConfig, ReviewQueue
from evalstream.assertions.harness.grading import ItemGrade, grade_items
from evalstream.assertions.harness.loader import load_evals
from evalstream.assertions.harness.report import build_report, render_markdown
from evalstream.connectors.anthropic_api.judge import AnthropicJudge, JudgeSettings
from evalstream.connectors.sandboxing.limited_subprocess import SubprocessSandbox
from tests.graders.judge_helpers import verdict
from tests.support.messages_api import MessagesAPIServer, MessagesRequest, Reply

JSON = Any
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "eval-harness"


def test_the_example_suite_loads_every_shape() -> None:
    loaded = load_evals(EXAMPLES / "eval-suite.yaml")
    assert loaded.suite is not None
    assert loaded.suite.name == "Feature X Evaluation Suite"
    kinds = {item.key: type(item.grader) for item in loaded.items}
    assert kinds == {
        "cap-string-001/tc-001": ExactMatchConfig,
        "cap-string-001/tc-002": ExactMatchConfig,
        "cap-string-001/tc-003": RegexConfig,
        "cap-codegen-001": FunctionOutputConfig,
        "cap-semantic-001": ModelGraderConfig,
        "cap-review-001": HumanGraderConfig,
        "reg-api-users-001": StructuralConfig,
        "reg-api-001": StructuralConfig,
        "reg-quality-001": StructuralConfig,
    }
    codegen = next(i for i in loaded.items if i.key == "cap-codegen-001")
    assert isinstance(codegen.grader, FunctionOutputConfig)
    assert [c.expected for c in codegen.grader.test_cases] == [120, 1, 3628800]
    users = next(i for i in loaded.items if i.key == "reg-api-users-001")
    assert isinstance(users.grader, StructuralConfig)
    assert users.grader.require_keys == ["body.data", "body.meta.page", "body.meta.per_page"]
    assert users.baseline["status"] == 200


def judge_handler(request: MessagesRequest) -> Reply:
    criteria = request.body["output_config"]["format"]["schema"]["properties"]["criteria"]
    names = criteria["items"]["properties"]["criterion"]["enum"]
    text = request.last_user_text
    good = "PostgreSQL 14+" in text and "DATABASE_URL" in text
    return Reply.text(verdict(dict.fromkeys(names, 5 if good else 2)))


def grade_examples(server: MessagesAPIServer, outputs: dict[str, JSON]) -> list[ItemGrade]:
    loaded = load_evals(EXAMPLES / "eval-suite.yaml")
    reviews = ReviewQueue.model_validate_json((EXAMPLES / "reviews.json").read_text())
    settings = JudgeSettings(api_key="k", base_url=server.base_url)

    async def run() -> list[ItemGrade]:
        async with AnthropicJudge(settings) as judge:
            return await grade_items(
                loaded.items, outputs, judge=judge, runner=SubprocessSandbox(), reviews=reviews
            )

    return asyncio.run(run())


def test_grading_and_report_of_the_examples(messages_api: MessagesAPIServer) -> None:
    messages_api.handler = judge_handler
    outputs = json.loads((EXAMPLES / "outputs.json").read_text())
    grades = grade_examples(messages_api, outputs)
    status = {g.item.key: g.status for g in grades}
    assert status == {
        "cap-string-001/tc-001": "pass",
        "cap-string-001/tc-002": "fail",  # one of three attempts is wrong
        "cap-string-001/tc-003": "pass",
        "cap-codegen-001": "pass",
        "cap-semantic-001": "pass",
        "cap-review-001": "pass",  # alice 5, bob 4
        "reg-api-users-001": "pass",
        "reg-api-001": "pass",
        "reg-quality-001": "fail",  # actionability fell by 0.4 > 0.3
    }
    regex = next(g for g in grades if g.item.key == "cap-string-001/tc-003")
    assert regex.attempts[0].details["captures"] == {"function_name": "reverse"}

    report = build_report(grades, suite_name="examples", run_id="r1", timestamp="t", ks=(3,))
    r = report["eval_report"]
    assert r["summary"]["total_evals"] == 9
    assert (r["summary"]["passed"], r["summary"]["failed"]) == (7, 2)
    assert r["summary"]["by_category"]["regression"] == {
        "total": 3,
        "passed": 2,
        "pass_rate": 0.667,
    }
    assert r["summary"]["by_grader"]["human"] == {"total": 1, "passed": 1, "pass_rate": 1.0}
    assert {f["eval_id"] for f in r["failures"]} == {"cap-string-001/tc-002", "reg-quality-001"}
    quality = next(f for f in r["failures"] if f["eval_id"] == "reg-quality-001")
    assert "quality_scores.actionability (delta)" in quality["reason"]
    # pass@1 averages c/n: seven items at 1, one at 2/3, one at 0
    assert r["metrics"]["pass_at_1"] == pytest.approx(round((7 + 2 / 3) / 9, 3))
    # one rule for k = 3: only the item with three attempts counts, for pass@3 and pass^3
    # alike: 1 - C(1,3)/C(3,3) = 1 and (2/3)^3; the other eight are left out, and said so
    assert r["metrics"]["pass_at_3"] == 1.0
    assert r["metrics"]["pass_hat_3"] == pytest.approx(round((2 / 3) ** 3, 3))
    for name in ("pass_at_3", "pass_hat_3"):
        assert r["metrics_coverage"][name] == {"items": 1, "excluded_fewer_than_k_attempts": 8}
    assert r["metrics_coverage"]["pass_at_1"] == {"items": 9, "excluded_fewer_than_k_attempts": 0}
    markdown = render_markdown(report)
    assert "| reg-quality-001 | fail |" in markdown
    assert "## By grader" in markdown


def test_missing_outputs_and_missing_judge(messages_api: MessagesAPIServer) -> None:
    loaded = load_evals(EXAMPLES / "capability" / "code-and-extraction.yaml")
    outputs = {"cap-semantic-001": "whatever"}
    grades = asyncio.run(grade_items(loaded.items, outputs))  # no judge, no runner
    status = {g.item.key: (g.status, g.reason()) for g in grades}
    assert status["cap-codegen-001"] == ("skipped", "no output for 'cap-codegen-001'")
    assert status["cap-semantic-001"][0] == "error"
    assert "no judge configured" in status["cap-semantic-001"][1]


def test_human_items_wait_for_enough_raters() -> None:
    loaded = load_evals(EXAMPLES / "capability" / "review-comments.yaml")
    queue = ReviewQueue.model_validate_json((EXAMPLES / "reviews.json").read_text())
    queue.ratings = [r for r in queue.ratings if r.rater == "alice"]
    [grade] = asyncio.run(grade_items(loaded.items, {}, reviews=queue))
    assert grade.status == "pending"
    assert "1 of 2 required ratings" in grade.reason()
    report = build_report([grade], suite_name="s", run_id="r", timestamp="t")["eval_report"]
    assert (report["summary"]["passed"], report["summary"]["pending"]) == (0, 1)
    assert report["summary"]["pass_rate"] == 0.0  # pending counts as not passed
    assert report["metrics"]["pass_at_1"] == 0.0


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_ref_cycle_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "eval_suite:\n  name: a\n  evals:\n    - $ref: b.yaml\n")
    write(tmp_path, "b.yaml", "eval_suite:\n  name: b\n  evals:\n    - $ref: a.yaml\n")
    with pytest.raises(SuiteError, match=r"\$ref cycle"):
        load_evals(tmp_path / "a.yaml")


def test_missing_ref_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", "eval_suite:\n  name: s\n  evals:\n    - $ref: nope.yaml\n")
    with pytest.raises(SuiteError) as caught:
        load_evals(path)
    assert caught.value.line == 4
    assert "names no file" in str(caught.value)


def test_unknown_code_method_lists_the_valid_ones(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yaml",
        "- id: x\n  grader:\n    type: code\n    config:\n      method: fuzzy\n",
    )
    with pytest.raises(SuiteError, match="valid methods: exact_match") as caught:
        load_evals(path)
    assert caught.value.line == 3


def test_bad_grader_option_points_at_the_grader(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.yaml",
        "- id: x\n  grader:\n    type: code\n    config:\n      method: regex\n"
        "      pattern: a\n      flags: [global]\n",
    )
    with pytest.raises(SuiteError, match="unknown regex flag 'global'"):
        load_evals(path)


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    item = "- id: x\n  grader:\n    type: code\n    config:\n      method: exact_match\n"
    write(tmp_path, "one.yaml", item)
    write(tmp_path, "two.yaml", item)
    suite = write(
        tmp_path,
        "s.yaml",
        "eval_suite:\n  name: s\n  evals:\n    - $ref: one.yaml\n    - $ref: two.yaml\n",
    )
    with pytest.raises(SuiteError, match="defined twice"):
        load_evals(suite)


def test_capability_file_without_test_cases(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "e.json",
        json.dumps({"schema_version": "1.0", "eval_type": "capability", "metadata": {"id": "c"}}),
    )
    with pytest.raises(SuiteError, match="needs `test_cases`"):
        load_evals(path)


def test_not_an_eval_file(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="not an eval-harness eval"):
        load_evals(write(tmp_path, "e.yaml", "hello: world\n"))
