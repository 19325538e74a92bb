"""Calibration of the LLM judge against human reviews: Cohen's kappa against values computed by
hand, its confidence interval, the confusion matrix, the disagreement order, the floor flag,
and `evalstream review calibration` run as a process on a queue and a judge-results file."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from evalstream.assertions.graders.calibration import (
    JudgeScore,
    calibrate,
    human_grades,
    judge_scores_from_json,
)
from evalstream.assertions.graders.human_review import ReviewQueue
from evalstream.assertions.graders.kappa import (
    Z_95,
    agreement_weights,
    cohen_kappa,
    confusion_matrix,
)
from evalstream.assertions.graders.model import ModelGraderConfig, grade_with_model
from evalstream.assertions.harness.grading import ItemGrade
from evalstream.assertions.harness.models import EvalItem
from evalstream.assertions.harness.report import build_report
from evalstream.assertions.judge.protocol import JudgeRequest, JudgeVerdict
from evalstream.stream.cli import cli
from evalstream.stream.telemetry.metrics import PipelineMetrics

JSON = Any
ROOT = Path(__file__).resolve().parents[2]

# 2x2, rows judge, columns human (categories false, true):
#              human F  human T
#   judge F       15       10      -> judge marginals F 25/50 = 0.5, T 0.5
#   judge T        5       20      -> human marginals F 20/50 = 0.4, T 0.6
# p_o = (15 + 20) / 50 = 0.7;  p_e = 0.5 * 0.4 + 0.5 * 0.6 = 0.5;  kappa = 0.2 / 0.5 = 0.4
BINARY_PAIRS = (
    [(False, False)] * 15 + [(False, True)] * 10 + [(True, False)] * 5 + [(True, True)] * 20
)

# Three ordered levels, six pairs (judge, human):
#   (1,1) (2,2) (3,3) (1,2) (2,3) (3,2)
# judge marginals 1/3 each; human marginals 1: 1/6, 2: 1/2, 3: 1/3.
# quadratic weights 1, 0.75, 0 (d = 0, 1, 2): p_o = (3 + 3 * 0.75) / 6 = 7/8;
#   p_e = 1/3 * sum_j c_j * colsum_j(W) = 1/3 * (1.75/6 + 2.5/2 + 1.75/3) = 17/24;
#   kappa = (21/24 - 17/24) / (7/24) = 4/7
# linear weights 1, 0.5, 0: p_o = (3 + 1.5) / 6 = 3/4; p_e = 1/3 * (1.5/6 + 2/2 + 1.5/3) = 7/12;
#   kappa = (9/12 - 7/12) / (5/12) = 2/5
# unweighted: p_o = 1/2; p_e = 1/3 * (1/6 + 1/2 + 1/3) = 1/3; kappa = (1/6) / (2/3) = 1/4
ORDINAL_PAIRS = [(1, 1), (2, 2), (3, 3), (1, 2), (2, 3), (3, 2)]


def test_unweighted_kappa_of_a_2x2_table() -> None:
    k = cohen_kappa(BINARY_PAIRS, [False, True])
    assert k.kappa == pytest.approx(0.4)
    assert k.observed == pytest.approx(0.7)
    assert k.expected == pytest.approx(0.5)
    assert k.n == 50


@pytest.mark.parametrize(
    ("weighting", "expected"), [("quadratic", 4 / 7), ("linear", 2 / 5), ("unweighted", 1 / 4)]
)
def test_weighted_kappa_on_three_levels(weighting: Any, expected: float) -> None:
    assert cohen_kappa(ORDINAL_PAIRS, [1, 2, 3], weighting).kappa == pytest.approx(expected)


def test_kappa_matches_the_scikit_learn_documented_example() -> None:
    # cohen_kappa_score([2, 0, 2, 2, 0, 1], [0, 0, 2, 2, 0, 2]) == 0.42857...: p_o = 4/6,
    # p_e = (2*3 + 1*0 + 3*3) / 36 = 15/36, kappa = (24 - 15) / (36 - 15) = 9/21
    pairs = list(zip([2, 0, 2, 2, 0, 1], [0, 0, 2, 2, 0, 2], strict=True))
    assert cohen_kappa(pairs, [0, 1, 2]).kappa == pytest.approx(9 / 21)


def test_large_sample_confidence_interval_of_the_2x2_table() -> None:
    # Fleiss, Cohen & Everitt (1969), unweighted: wbar_i. = human marginal of i, wbar_.j =
    # judge marginal of j, 1 - kappa = 0.6:
    #   FF: 0.3 * (1 - (0.4 + 0.5) * 0.6)^2 = 0.3 * 0.46^2 = 0.06348
    #   FT: 0.2 * (0 - (0.4 + 0.5) * 0.6)^2 = 0.2 * 0.54^2 = 0.05832
    #   TF: 0.1 * (0 - (0.6 + 0.5) * 0.6)^2 = 0.1 * 0.66^2 = 0.04356
    #   TT: 0.4 * (1 - (0.6 + 0.5) * 0.6)^2 = 0.4 * 0.34^2 = 0.04624    sum = 0.2116
    #   minus (kappa - p_e (1 - kappa))^2 = (0.4 - 0.3)^2 = 0.01   -> 0.2016
    #   var = 0.2016 / (50 * 0.5^2) = 0.016128, SE = 0.12700
    k = cohen_kappa(BINARY_PAIRS, [False, True])
    se = math.sqrt(0.016128)
    assert k.standard_error == pytest.approx(se)
    assert k.ci_low == pytest.approx(0.4 - Z_95 * se)
    assert k.ci_high == pytest.approx(0.4 + Z_95 * se)
    assert k.ci_low is not None
    assert 0.15 < k.ci_low < 0.16


def test_perfect_agreement_has_no_spread_and_one_category_is_undefined() -> None:
    perfect = cohen_kappa([(1, 1), (2, 2), (3, 3)], [1, 2, 3], "quadratic")
    assert perfect.kappa == pytest.approx(1.0)
    assert perfect.standard_error == pytest.approx(0.0, abs=1e-9)
    assert cohen_kappa([(2, 2), (2, 2)], [1, 2, 3]).kappa is None
    assert cohen_kappa([], [1, 2]).kappa is None


def test_confusion_matrix_and_weights() -> None:
    assert confusion_matrix(ORDINAL_PAIRS, [1, 2, 3]) == [[1, 1, 0], [0, 1, 1], [0, 1, 1]]
    assert confusion_matrix(BINARY_PAIRS, [False, True]) == [[15, 10], [5, 20]]
    assert agreement_weights(3, "quadratic")[0] == [1.0, 0.75, 0.0]
    with pytest.raises(ValueError, match="outside the categories"):
        confusion_matrix([(1, 9)], [1, 2, 3])


def _queue(ratings: list[tuple[str, str, int]], items: list[str]) -> ReviewQueue:
    return ReviewQueue.model_validate(
        {
            "name": "answers",
            "config": {"evaluators": {"min_required": 2}, "rating_scale": {"range": [1, 5]}},
            "items": [{"id": i, "output": f"output {i}"} for i in items],
            "ratings": [{"item_id": i, "rater": r, "value": v} for i, r, v in ratings],
        }
    )


ITEMS = ["a", "b", "c", "d", "e"]
RATINGS = [
    ("a", "ann", 5),
    ("a", "bob", 4),  # lower median 4
    ("b", "ann", 2),
    ("b", "bob", 2),
    ("c", "ann", 1),
    ("c", "bob", 2),
    ("c", "cat", 1),  # median 1
    ("d", "ann", 4),
    ("d", "bob", 5),  # lower median 4
    ("e", "ann", 3),  # one rater: below min_required, left out
]
JUDGE = [("a", 4), ("b", 5), ("c", 3), ("d", 3), ("e", 3)]


def test_human_grade_is_the_lower_median_of_enough_raters() -> None:
    grades = human_grades(_queue(RATINGS, ITEMS))
    assert grades[("a", "overall")] == (4, 2)
    assert grades[("c", "overall")] == (1, 3)
    assert ("e", "overall") not in grades


def test_disagreements_come_largest_first_and_the_floor_flags() -> None:
    queue = _queue(RATINGS, ITEMS)
    scores = [JudgeScore(i, "overall", v) for i, v in JUDGE]
    (rubric,) = calibrate(queue, scores, floor=0.6)
    assert rubric.kappa.weighting == "quadratic"
    assert rubric.kappa.n == 4
    assert rubric.unmatched_judge == 1
    # b: judge 5 vs human 2 (distance 3); c: 3 vs 1 (2); d: 3 vs 4 (1); a agrees.
    assert [(d.item_id, d.distance) for d in rubric.disagreements] == [
        ("b", 3.0),
        ("c", 2.0),
        ("d", 1.0),
    ]
    assert rubric.confusion[4][1] == 1  # judge 5, human 2
    assert rubric.kappa.kappa is not None
    assert rubric.kappa.kappa < 0.6
    assert rubric.below_floor
    (lenient,) = calibrate(queue, scores, floor=rubric.kappa.kappa - 0.01)
    assert not lenient.below_floor


def test_judge_results_accept_scale_values_and_normalised_scores() -> None:
    queue = _queue(RATINGS, ITEMS)
    scores = judge_scores_from_json(
        {"results": [{"item_id": "a", "value": 4}, {"eval_id": "b", "score": 0.625}]}, queue
    )
    # 0.625 on 1-5: 1 + 0.625 * 4 = 3.5, halves up -> 4
    assert [(s.item_id, s.value) for s in scores] == [("a", 4), ("b", 4)]
    with pytest.raises(ValueError, match="not on the queue's scale"):
        judge_scores_from_json([{"item_id": "a", "value": 7}], queue)
    with pytest.raises(ValueError, match="criterion 'style'"):
        judge_scores_from_json([{"item_id": "a", "criterion": "style", "value": 3}], queue)
    with pytest.raises(ValueError, match="from 0 to 1"):
        judge_scores_from_json([{"item_id": "a", "score": 4}], queue)
    with pytest.raises(ValueError, match="a second judge score of item 'a'"):
        judge_scores_from_json([{"item_id": "a", "value": 3}, {"item_id": "a", "score": 1}], queue)
    with pytest.raises(ValueError, match="not on the queue's scale"):
        judge_scores_from_json([{"item_id": "a", "value": True}], queue)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", "from evalstream.stream.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture
def fixture_files(tmp_path: Path) -> tuple[Path, Path]:
    queue = tmp_path / "queue.json"
    queue.write_text(_queue(RATINGS, ITEMS).model_dump_json(), "utf-8")
    judge = tmp_path / "judge.jsonl"
    judge.write_text("\n".join(json.dumps({"item_id": i, "value": v}) for i, v in JUDGE), "utf-8")
    return queue, judge


def test_review_calibration_cli_json_and_metrics(
    fixture_files: tuple[Path, Path], tmp_path: Path
) -> None:
    queue, judge = fixture_files
    metrics = tmp_path / "agreement.prom"
    result = _run(
        "review", "calibration", str(queue), "--judge", str(judge), "--format", "json",
        "--metrics-file", str(metrics), "--fail-below-floor",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    (rubric,) = json.loads(result.stdout)["rubrics"]
    assert rubric["rubric"] == "overall"
    assert rubric["below_floor"] is True
    assert [d["item_id"] for d in rubric["disagreements"]] == ["b", "c", "d"]
    assert rubric["agreement"]["weighting"] == "quadratic"
    assert sum(map(sum, rubric["confusion_matrix"]["counts"])) == 4
    text = metrics.read_text("utf-8")
    kappa = rubric["agreement"]["kappa"]
    assert f'evalstream_judge_human_agreement{{rubric="overall"}} {kappa!r}' in text
    assert 'evalstream_judge_human_agreement_below_floor{rubric="overall"} 1.0' in text


def test_review_calibration_cli_table_and_bad_input(
    fixture_files: tuple[Path, Path], tmp_path: Path
) -> None:
    queue, judge = fixture_files
    table = _run("review", "calibration", str(queue), "--judge", str(judge), "--floor", "-1")
    assert table.returncode == 0, table.stderr
    assert "confusion matrix" in table.stdout
    assert "fewer than 30 items for overall" in table.stdout
    assert "BELOW FLOOR" not in table.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"item_id": "a", "value": 9}]), "utf-8")
    error = _run("review", "calibration", str(queue), "--judge", str(bad))
    assert error.returncode != 0
    assert "value 9 is not on the queue's scale" in error.stderr


def test_status_and_rate_show_disagreements_first(fixture_files: tuple[Path, Path]) -> None:
    queue, judge = fixture_files
    compare = ["--judge", str(judge), "--disagreements-first"]
    status = CliRunner().invoke(cli, ["review", "status", str(queue), *compare, "--format", "json"])
    assert status.exit_code == 0, status.output
    items = json.loads(status.output)["items"]
    # b 3, c 2, d 1, a 0 (agrees); e has one rating, so no human grade to compare: last
    assert [(i["item_id"], i["judge_distance"]) for i in items] == [
        ("b", 3.0),
        ("c", 2.0),
        ("d", 1.0),
        ("a", 0.0),
        ("e", None),
    ]
    rate = CliRunner().invoke(
        cli, ["review", "rate", str(queue), "--rater", "dan", *compare], input="1\nq\n"
    )
    assert rate.exit_code == 0, rate.output
    saved = ReviewQueue.model_validate_json(queue.read_text("utf-8"))
    assert [(r.item_id, r.value) for r in saved.ratings if r.rater == "dan"] == [("b", 1)]
    alone = CliRunner().invoke(cli, ["review", "status", str(queue), "--disagreements-first"])
    assert alone.exit_code != 0
    assert "needs --judge" in alone.output


class ScoreByOutput:
    """A judge answering a fixed normalised score per output."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    async def judge(self, request: JudgeRequest) -> JudgeVerdict:
        score = self.scores[request.output]
        return JudgeVerdict(score=score, criteria_scores={"meets the rubric": score})


def test_calibration_reads_the_judge_scores_of_a_harness_report(tmp_path: Path) -> None:
    config = ModelGraderConfig(rubric="Is the answer helpful?")
    judge = ScoreByOutput({"out m1": 1.0, "out m2": 0.25, "out m3": 0.5})
    grades = [
        ItemGrade(
            EvalItem(eval_id=key, eval_type="capability", grader_type="model", grader=config),
            attempts=[asyncio.run(grade_with_model(f"out {key}", config, judge))],
        )
        for key in ("m1", "m2", "m3")
    ]
    report = tmp_path / "report.json"
    saved = build_report(grades, suite_name="s", run_id="r", timestamp="t")
    report.write_text(json.dumps(saved), "utf-8")
    queue = tmp_path / "queue.json"
    ratings = [("m1", "ann", 5), ("m1", "bob", 5), ("m2", "ann", 2), ("m2", "bob", 3)]
    ratings += [("m3", "ann", 4), ("m3", "bob", 4)]
    queue.write_text(_queue(ratings, ["m1", "m2", "m3"]).model_dump_json(), "utf-8")
    result = _run("review", "calibration", str(queue), "--judge", str(report), "--format", "json")
    assert result.returncode == 0, result.stderr
    (rubric,) = json.loads(result.stdout)["rubrics"]
    # judge 1.0 -> 5, 0.25 -> 2, 0.5 -> 3 on 1-5; humans 5, 2 (lower median of 2 and 3), 4
    assert rubric["disagreements"] == [
        {"item_id": "m3", "judge": 3, "human": 4, "distance": 1.0, "raters": 2}
    ]
    assert rubric["agreement"]["n"] == 3


def test_the_runtime_registry_declares_the_agreement_gauges_the_alert_reads() -> None:
    rules = ROOT / "deploy/prometheus/rules/operations.yml"
    (expr,) = [
        rule["expr"]
        for group in yaml.safe_load(rules.read_text("utf-8"))["groups"]
        for rule in group["rules"]
        if rule["alert"] == "EvalstreamJudgeHumanAgreementBelowFloor"
    ]
    used = set(re.findall(r"\bevalstream_[a-z_]+", expr))
    declared = {family.name for family in PipelineMetrics(process=False).registry.collect()}
    assert used <= declared, used - declared
    assert "evalstream_judge_human_agreement" in declared


def test_a_binary_queue_uses_unweighted_kappa_and_the_pass_threshold() -> None:
    queue = ReviewQueue.model_validate(
        {
            "config": {"rating_scale": {"type": "binary"}, "pass_threshold": 0.5},
            "items": [{"id": f"x{i}", "output": "o"} for i in range(1, 5)],
            "ratings": [
                {"item_id": f"x{i}", "rater": "ann", "value": v}
                for i, v in zip(range(1, 5), [True, True, False, False], strict=True)
            ],
        }
    )
    records = [{"item_id": f"x{i}", "score": s} for i, s in enumerate([0.9, 0.2, 0.6, 0.1], 1)]
    (rubric,) = calibrate(queue, judge_scores_from_json(records, queue))
    # judge T F T F against human T T F F: p_o = 1/2, every marginal 1/2, p_e = 1/2, kappa 0
    assert rubric.kappa.weighting == "unweighted"
    assert rubric.kappa.kappa == pytest.approx(0.0)
    assert rubric.confusion == [[1, 1], [1, 1]]
    assert [d.item_id for d in rubric.disagreements] == ["x2", "x3"]
    assert rubric.below_floor


@pytest.mark.parametrize("weighting", ["unweighted", "linear", "quadratic"])
def test_the_standard_error_is_the_delta_method_variance(weighting: Any) -> None:
    """Kappa is a smooth function of the cell proportions p; for multinomial counts its
    asymptotic variance is (sum p g^2 - (sum p g)^2) / n with g the gradient of kappa in p —
    computed here by finite differences, independently of the closed form in kappa.py."""
    pairs = [(1, 1)] * 7 + [(2, 2)] * 5 + [(3, 3)] * 4 + [(1, 2)] * 3 + [(2, 3)] * 2
    pairs += [(3, 1)] + [(2, 1)] * 2 + [(3, 2)] * 3
    n, cells = len(pairs), [(i, j) for i in range(3) for j in range(3)]
    weights = agreement_weights(3, weighting)
    counts = confusion_matrix(pairs, [1, 2, 3])
    p = {(i, j): counts[i][j] / n for i, j in cells}

    def kappa_of(q: dict[tuple[int, int], float]) -> float:
        rows = [sum(q[(i, j)] for j in range(3)) for i in range(3)]
        cols = [sum(q[(i, j)] for i in range(3)) for j in range(3)]
        observed = sum(weights[i][j] * q[(i, j)] for i, j in cells)
        expected = sum(weights[i][j] * rows[i] * cols[j] for i, j in cells)
        return (observed - expected) / (1 - expected)

    h = 1e-7
    gradient = {c: (kappa_of({**p, c: p[c] + h}) - kappa_of(p)) / h for c in cells}
    mean = sum(p[c] * gradient[c] for c in cells)
    variance = (sum(p[c] * gradient[c] ** 2 for c in cells) - mean**2) / n
    k = cohen_kappa(pairs, [1, 2, 3], weighting)
    assert k.kappa == pytest.approx(kappa_of(p))
    assert k.standard_error == pytest.approx(math.sqrt(variance), rel=1e-4)
