"""Human grading: Krippendorff's alpha against the published reference values, the review
queue's rules, and `evalstream review` driven through its terminal prompts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from evalstream.assertions.graders.agreement import krippendorff_alpha, percent_agreement
from evalstream.assertions.graders.human_review import Rating, ReviewQueue
from evalstream.stream.cli import cli

JSON = Any
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "eval-harness"

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example C: four
# observers, twelve units, missing values; published alphas: nominal .743, ordinal .815,
# interval .849.
K2011 = {
    1: [1, 1, 1],
    2: [2, 2, 3, 2],
    3: [3, 3, 3, 3],
    4: [3, 3, 3, 3],
    5: [2, 2, 2, 2],
    6: [1, 2, 3, 4],
    7: [4, 4, 4, 4],
    8: [1, 1, 2, 1],
    9: [2, 2, 2, 2],
    10: [5, 5, 5],
    11: [1, 1],
    12: [3],
}


@pytest.mark.parametrize(
    ("metric", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)]
)
def test_alpha_matches_krippendorffs_worked_example(metric: Any, published: float) -> None:
    result = krippendorff_alpha(K2011, metric)
    assert result.alpha == pytest.approx(published, abs=0.0005)
    assert (result.units, result.values) == (11, 40)  # unit 12 has one value: not pairable


def test_alpha_edge_cases() -> None:
    assert krippendorff_alpha({1: [3, 3], 2: [3, 3]}).alpha is None  # no variation
    assert krippendorff_alpha({1: [1], 2: [2]}).alpha is None  # nothing pairable
    perfect = krippendorff_alpha({1: [1, 1], 2: [2, 2], 3: [3, 3]}, "ordinal")
    assert perfect.alpha == pytest.approx(1.0)
    opposed = krippendorff_alpha({1: [True, False], 2: [False, True]}, "nominal")
    assert opposed.alpha is not None
    assert opposed.alpha < 0


def test_percent_agreement() -> None:
    assert percent_agreement([4, 4, 4]) == 1.0
    assert percent_agreement([4, 5]) == 0.0
    assert percent_agreement([4, 5], within=1) == 1.0
    assert percent_agreement([True, False, True]) == pytest.approx(1 / 3)
    assert percent_agreement([5]) is None


def queue(scale: dict[str, JSON], items: list[dict[str, JSON]], **config: JSON) -> ReviewQueue:
    return ReviewQueue.model_validate({"config": {"rating_scale": scale, **config}, "items": items})


def test_ratings_are_validated_against_the_scale() -> None:
    q = queue({"type": "likert", "range": [1, 5]}, [{"id": "a", "output": "x"}])
    with pytest.raises(ValueError, match="integer 1-5"):
        q.add(Rating(item_id="a", rater="r", value=6))
    with pytest.raises(ValueError, match="integer 1-5"):
        q.add(Rating(item_id="a", rater="r", value=True))
    with pytest.raises(ValueError, match="no item 'b'"):
        q.add(Rating(item_id="b", rater="r", value=3))
    q.add(Rating(item_id="a", rater="r", value=2))
    q.add(Rating(item_id="a", rater="r", value=4))  # a rater's new rating replaces the old
    assert [r.value for r in q.ratings] == [4]


def test_max_raters_and_pending_items() -> None:
    q = queue(
        {"type": "binary"},
        [{"id": "a", "output": "x"}, {"id": "b", "output": "y"}],
        evaluators={"min_required": 2, "max_allowed": 2},
    )
    q.add(Rating(item_id="a", rater="r1", value=True))
    q.add(Rating(item_id="a", rater="r2", value=False))
    with pytest.raises(ValueError, match="max_allowed"):
        q.add(Rating(item_id="a", rater="r3", value=True))
    assert [i.id for i in q.pending_for("r3")] == ["b"]
    assert [i.id for i in q.pending_for("r1")] == ["b"]
    result = q.result(q.item("a"))
    assert (result.status, result.score, result.needs_adjudication) == ("pass", 0.5, True)
    assert q.result(q.item("b")).status == "pending"


def test_blind_ranking_shuffles_per_rater_and_maps_back() -> None:
    outputs = [{"id": f"v{i}", "text": f"output {i}"} for i in range(4)]
    q = queue(
        {"type": "ranking", "max_items": 4},
        [{"id": "a", "outputs": outputs, "metadata": {"model": "secret"}}],
    )
    orders = {tuple(o.id for _, o in q.presented_outputs(q.item("a"), f"r{i}")) for i in range(8)}
    assert len(orders) > 1  # different raters see different orders
    assert [label for label, _ in q.presented_outputs(q.item("a"), "r0")] == ["A", "B", "C", "D"]
    assert q.visible_metadata(q.item("a")) == {}
    with pytest.raises(ValueError, match="orders every output"):
        q.add(Rating(item_id="a", rater="r", value=["v0", "v1"]))
    q.add(Rating(item_id="a", rater="r1", value=["v0", "v1", "v2", "v3"]))
    q.add(Rating(item_id="a", rater="r2", value=["v0", "v2", "v1", "v3"]))
    result = q.result(q.item("a"))
    assert result.mean_ranks == {"v0": 1.0, "v1": 2.5, "v2": 2.5, "v3": 4.0}
    assert q.agreement().metric == "ordinal"


def test_queue_file_rules() -> None:
    with pytest.raises(ValidationError, match="needs an `output`"):
        queue({"type": "likert"}, [{"id": "a"}])
    with pytest.raises(ValidationError, match="duplicate item ids"):
        queue({"type": "likert"}, [{"id": "a", "output": "x"}, {"id": "a", "output": "y"}])
    with pytest.raises(ValidationError, match="ties in rankings are not supported"):
        queue({"type": "ranking", "tie_allowed": True}, [])


@pytest.fixture
def queue_file(tmp_path: Path) -> Path:
    target = tmp_path / "reviews.json"
    shutil.copy(EXAMPLES / "reviews.json", target)
    return target


def test_review_rate_in_the_terminal(queue_file: Path) -> None:
    runner = CliRunner()
    # item 1: an invalid answer, then 4; item 2: 3
    result = runner.invoke(
        cli, ["review", "rate", str(queue_file), "--rater", "carol"], input="9\n4\n3\n"
    )
    assert result.exit_code == 0, result.output
    assert "not a valid answer: '9'" in result.output
    assert "candidate-v2" not in result.output  # blind: metadata hidden
    assert "2 ratings saved" in result.output
    saved = json.loads(queue_file.read_text())
    carol = [(r["item_id"], r["value"]) for r in saved["ratings"] if r["rater"] == "carol"]
    assert carol == [("cap-review-001", 4), ("cap-review-002", 3)]
    again = runner.invoke(cli, ["review", "rate", str(queue_file), "--rater", "carol"])
    assert "0 ratings saved" in again.output


def test_review_quit_keeps_what_was_rated(queue_file: Path) -> None:
    result = CliRunner().invoke(
        cli, ["review", "rate", str(queue_file), "--rater", "dan"], input="5\nq\n"
    )
    assert result.exit_code == 0, result.output
    assert "1 ratings saved" in result.output
    saved = json.loads(queue_file.read_text())
    assert [r["value"] for r in saved["ratings"] if r["rater"] == "dan"] == [5]


def test_review_status_json_reports_alpha(queue_file: Path) -> None:
    result = CliRunner().invoke(cli, ["review", "status", str(queue_file), "--format", "json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    units = {"a": [5, 4], "b": [2, 2]}
    assert payload["agreement"]["alpha"] == pytest.approx(
        krippendorff_alpha(units, "ordinal").alpha
    )
    assert [i["status"] for i in payload["items"]] == ["pass", "fail"]


def test_review_status_table(queue_file: Path) -> None:
    result = CliRunner().invoke(cli, ["review", "status", str(queue_file)])
    assert result.exit_code == 0, result.output
    assert "Krippendorff's alpha (ordinal)" in result.output


def test_a_bad_queue_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps({"items": [{"id": "a"}]}))
    result = CliRunner().invoke(cli, ["review", "status", str(bad)])
    assert result.exit_code == 2
    assert "needs an `output`" in result.output
    missing = CliRunner().invoke(cli, ["review", "status", str(tmp_path / "none.json")])
    assert missing.exit_code == 2
    assert "cannot read review queue" in missing.output
