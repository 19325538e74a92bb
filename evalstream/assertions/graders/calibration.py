"""Calibration of the LLM judge against human reviews: Cohen's kappa per rubric.

The human side is a review queue (`evalstream.assertions.graders.human_review`); the judge side is a
list of judge scores of the same items (`judge_scores_from_json`). A rubric is a criterion of the
queue's scale (`overall` when the scale has none). Per rubric, an item counts when it has a
judge score and at least `min_required` human ratings; the human grade of an item is the lower
median of its raters' values (for binary ratings a tie between raters is a fail, the cautious
side).

Weighting: quadratic for likert scales by default, unweighted for binary ones. A rubric whose
kappa is below `floor` (default 0.6, "substantial" on the Landis & Koch scale) — or undefined,
so no judge can be trusted unchecked — is flagged. Disagreements are listed largest distance
first (|judge - human| in scale points; 1 for a binary mismatch), then by item id.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from evalstream.assertions.graders.human_review import OVERALL, ReviewQueue
from evalstream.assertions.graders.kappa import Kappa, Weighting, cohen_kappa, confusion_matrix

JSON = Any
DEFAULT_FLOOR = 0.6


@dataclass(frozen=True)
class JudgeScore:
    item_id: str
    criterion: str
    value: int | bool


@dataclass(frozen=True)
class Disagreement:
    item_id: str
    judge: int | bool
    human: int | bool
    distance: float
    raters: int

    def to_json(self) -> dict[str, JSON]:
        return {
            "item_id": self.item_id,
            "judge": self.judge,
            "human": self.human,
            "distance": self.distance,
            "raters": self.raters,
        }


@dataclass(frozen=True)
class RubricCalibration:
    rubric: str
    categories: list[int | bool]
    kappa: Kappa
    confusion: list[list[int]]  # rows: judge, columns: human
    disagreements: list[Disagreement]
    floor: float
    unmatched_judge: int  # judge scores without enough human ratings

    @property
    def below_floor(self) -> bool:
        return self.kappa.kappa is None or self.kappa.kappa < self.floor

    def to_json(self) -> dict[str, JSON]:
        return {
            "rubric": self.rubric,
            "agreement": self.kappa.to_json(),
            "floor": self.floor,
            "below_floor": self.below_floor,
            "categories": self.categories,
            "confusion_matrix": {"rows": "judge", "columns": "human", "counts": self.confusion},
            "disagreements": [d.to_json() for d in self.disagreements],
            "unmatched_judge_scores": self.unmatched_judge,
        }


def default_weighting(queue: ReviewQueue) -> Weighting:
    return "unweighted" if queue.config.rating_scale.type == "binary" else "quadratic"


def categories_of(queue: ReviewQueue) -> list[int | bool]:
    scale = queue.config.rating_scale
    if scale.type == "binary":
        return [False, True]
    if scale.type == "likert":
        return list(range(scale.range[0], scale.range[1] + 1))
    raise ValueError("calibration needs a likert or binary queue; rankings have no judge score")


def human_grades(queue: ReviewQueue) -> dict[tuple[str, str], tuple[int | bool, int]]:
    """(item, criterion) -> (lower median of the raters' values, number of raters), for items
    with at least `min_required` raters."""
    values: dict[tuple[str, str], list[int | bool]] = defaultdict(list)
    for r in queue.ratings:
        if not isinstance(r.value, list):
            values[(r.item_id, r.criterion)].append(r.value)
    minimum = queue.config.evaluators.min_required
    grades: dict[tuple[str, str], tuple[int | bool, int]] = {}
    for key, given in values.items():
        if len(given) >= minimum:
            ordered = sorted(given)
            grades[key] = (ordered[(len(ordered) - 1) // 2], len(ordered))
    return grades


def calibrate(
    queue: ReviewQueue,
    judge: Sequence[JudgeScore],
    *,
    floor: float = DEFAULT_FLOOR,
    weighting: Weighting | None = None,
) -> list[RubricCalibration]:
    """One calibration per rubric the judge scored, in the scale's criteria order."""
    categories = categories_of(queue)
    chosen = weighting or default_weighting(queue)
    humans = human_grades(queue)
    by_rubric: dict[str, list[JudgeScore]] = defaultdict(list)
    for score in judge:
        by_rubric[score.criterion].append(score)
    order = queue.config.rating_scale.criteria_names()
    rubrics = sorted(by_rubric, key=lambda c: (order.index(c) if c in order else len(order), c))
    out = []
    for rubric in rubrics:
        pairs: list[tuple[Hashable, Hashable]] = []
        disagreements = []
        unmatched = 0
        for score in by_rubric[rubric]:
            human = humans.get((score.item_id, rubric))
            if human is None:
                unmatched += 1
                continue
            pairs.append((score.value, human[0]))
            if score.value != human[0]:
                distance = float(abs(int(score.value) - int(human[0])))
                disagreements.append(
                    Disagreement(score.item_id, score.value, human[0], distance, human[1])
                )
        disagreements.sort(key=lambda d: (-d.distance, d.item_id))
        out.append(
            RubricCalibration(
                rubric=rubric,
                categories=categories,
                kappa=cohen_kappa(pairs, categories, chosen),
                confusion=confusion_matrix(pairs, categories),
                disagreements=disagreements,
                floor=floor,
                unmatched_judge=unmatched,
            )
        )
    return out


def disagreement_by_item(queue: ReviewQueue, judge: Sequence[JudgeScore]) -> dict[str, float]:
    """item -> its largest |judge - human| over the rubrics, for items with a judge score and
    enough human ratings (0 when they agree)."""
    humans = human_grades(queue)
    out: dict[str, float] = {}
    for score in judge:
        human = humans.get((score.item_id, score.criterion))
        if human is not None:
            distance = float(abs(int(score.value) - int(human[0])))
            out[score.item_id] = max(distance, out.get(score.item_id, 0.0))
    return out


def disagreements_first(item_ids: Sequence[str], distances: dict[str, float]) -> list[str]:
    """`item_ids` with the largest judge-human distance first; items without one keep their
    order after the compared ones."""
    position = {item: i for i, item in enumerate(item_ids)}
    return sorted(item_ids, key=lambda i: (i not in distances, -distances.get(i, 0.0), position[i]))


def judge_scores_from_json(data: JSON, queue: ReviewQueue) -> list[JudgeScore]:
    """Judge scores from a list of records (or `{"results": [...]}`), each naming the item
    (`item_id` or `eval_id`), optionally the `criterion` (default `overall`), and either
    `value`, on the queue's scale (an integer on the likert range, or true / false), or
    `score` in [0, 1] as the model grader and `llm.judge` report it (normalised; mapped to
    the nearest scale point, halves up, or on a binary scale to pass at the queue's
    `pass_threshold`).
    A saved eval-harness report (`{"eval_report": ...}`) gives the judge scores of its
    model-graded items. Raises ValueError naming the record at fault."""
    if isinstance(data, dict) and isinstance(data.get("eval_report"), dict):
        data = records_from_report(data["eval_report"], queue)
    records = data.get("results") if isinstance(data, dict) else data
    if not isinstance(records, list):
        raise ValueError('judge results: expected a list of records or {"results": [...]}')
    scale = queue.config.rating_scale
    categories = categories_of(queue)
    criteria = scale.criteria_names()
    out = []
    seen: set[tuple[str, str]] = set()
    for index, record in enumerate(records):
        where = f"judge result #{index + 1}"
        if not isinstance(record, dict):
            raise ValueError(f"{where}: expected an object with item_id and value or score")
        item_id = record.get("item_id", record.get("eval_id"))
        if not isinstance(item_id, str) or not item_id:
            raise ValueError(f"{where}: needs an `item_id` (or `eval_id`) string")
        criterion = record.get("criterion", OVERALL)
        if criterion not in criteria:
            raise ValueError(f"{where}: criterion {criterion!r}; valid: {', '.join(criteria)}")
        if "value" in record:
            value = record["value"]
            if value not in categories or isinstance(value, bool) != (scale.type == "binary"):
                raise ValueError(
                    f"{where}: value {value!r} is not on the queue's scale "
                    f"({', '.join(str(c).lower() for c in categories)})"
                )
        elif "score" in record:
            value = _from_normalised(record["score"], queue, where)
        else:
            raise ValueError(f"{where}: needs `value` (on the queue's scale) or `score` (0-1)")
        if (item_id, criterion) in seen:
            raise ValueError(
                f"{where}: a second judge score of item {item_id!r}, criterion {criterion!r}; "
                "keep one score per item and criterion"
            )
        seen.add((item_id, criterion))
        out.append(JudgeScore(item_id, str(criterion), value))
    return out


def records_from_report(report: dict[str, JSON], queue: ReviewQueue) -> list[dict[str, JSON]]:
    """Judge records from an eval-harness report's `items`: per model-graded item, the judge's
    per-criterion scores for the queue's named criteria, else its overall score."""
    criteria = queue.config.rating_scale.criteria_names()
    records: list[dict[str, JSON]] = []
    for row in report.get("items") or []:
        judge = row.get("judge") if isinstance(row, dict) else None
        if not isinstance(judge, dict):
            continue
        named = judge.get("criteria_scores") or {}
        matching = [c for c in criteria if c in named]
        if matching:
            records += [
                {"item_id": row["eval_id"], "criterion": c, "score": named[c]} for c in matching
            ]
        elif criteria == [OVERALL]:
            records.append({"item_id": row["eval_id"], "score": judge.get("score")})
    return records


def _from_normalised(score: JSON, queue: ReviewQueue, where: str) -> int | bool:
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise ValueError(f"{where}: score {score!r} must be a number from 0 to 1 (normalised)")
    scale = queue.config.rating_scale
    if scale.type == "binary":
        return bool(score >= queue.config.pass_threshold)
    low, high = scale.range
    return low + math.floor(score * (high - low) + 0.5)  # half up, not to even
