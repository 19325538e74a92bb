"""Human grading: the eval-harness human grader configuration, the review queue and its ratings.

A queue is one JSON file: the scale, the rubric, whether reviews are blind, the items (an input
and the output to rate, or several outputs to rank) and every rating given so far. The
terminal front end is `evalstream review` (`evalstream/stream/commands/review.py`); everything here
is pure: validation of a rating against the scale, what a rater sees (blind mode hides metadata
and, for rankings, shuffles and relabels the outputs per rater), per-item results and the
inter-rater agreement (`evalstream.assertions.graders.agreement`: Krippendorff's alpha over the
queue; per item the
share of agreeing rater pairs, within one point on a Likert scale, which flags items for
adjudication when it falls below `agreement_threshold`).

Scales: `likert` (integers on `range`, labelled), `binary` (true / false), `ranking` (a full
order of the item's outputs, best first; ties are not supported).
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalstream.assertions.graders.agreement import (
    Agreement,
    Metric,
    krippendorff_alpha,
    percent_agreement,
)

JSON = Any
RatingValue = int | bool | list[str]
OVERALL = "overall"


class BinaryOption(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    value: bool
    label: str
    description: str = ""


class RatingScale(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["likert", "binary", "ranking"] = "likert"
    range: tuple[int, int] = (1, 5)
    labels: dict[int, str] = Field(default_factory=dict)
    options: list[BinaryOption] = Field(default_factory=list)
    criteria: list[str] = Field(default_factory=list)
    description: str = ""
    tie_allowed: bool = False
    min_items: int = Field(2, ge=2)
    max_items: int = Field(5, ge=2)

    @model_validator(mode="after")
    def _consistent(self) -> RatingScale:
        if self.range[1] <= self.range[0]:
            raise ValueError(f"range {list(self.range)}: the upper bound must be larger")
        if self.tie_allowed:
            raise ValueError("tie_allowed: ties in rankings are not supported; set it to false")
        return self

    @property
    def metric(self) -> Metric:
        return {"likert": "ordinal", "binary": "nominal", "ranking": "ordinal"}[self.type]  # type: ignore[return-value]  # the dict holds Metric literals

    def criteria_names(self) -> list[str]:
        return self.criteria if self.type == "likert" and self.criteria else [OVERALL]

    def label(self, value: RatingValue) -> str:
        if self.type == "binary":
            found = next((o.label for o in self.options if o.value == value), None)
            return found or ("Pass" if value else "Fail")
        if isinstance(value, int) and value in self.labels:
            return f"{value} ({self.labels[value]})"
        return str(value)

    def normalise(self, value: RatingValue) -> float | None:
        """A likert or binary value on [0, 1]; None for rankings."""
        if self.type == "binary":
            return 1.0 if value else 0.0
        if self.type == "likert" and isinstance(value, int):
            low, high = self.range
            return (value - low) / (high - low)
        return None


class Evaluators(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    min_required: int = Field(1, ge=1)
    max_allowed: int = Field(5, ge=1)
    agreement_threshold: float = Field(0.8, ge=-1, le=1)


class HumanGraderConfig(BaseModel):
    """The eval-harness `grader: {type: human, config: ...}`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    interface: Literal["cli", "web", "api"] = "cli"
    evaluators: Evaluators = Field(default_factory=Evaluators)
    rating_scale: RatingScale = Field(default_factory=RatingScale)
    rubric: str = ""
    time_limit_minutes: float | None = None
    blind_evaluation: bool = True
    pass_threshold: float = Field(0.5, ge=0, le=1)


class RankedOutput(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    text: str


class ReviewItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    input: JSON = None
    output: str | None = None
    outputs: list[RankedOutput] = Field(default_factory=list)
    metadata: dict[str, JSON] = Field(default_factory=dict)


class Rating(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    item_id: str
    rater: str = Field(min_length=1)
    criterion: str = OVERALL
    value: RatingValue
    rated_at: str | None = None
    seconds: float | None = Field(None, ge=0)
    comment: str = ""


class ItemResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    item_id: str
    raters: list[str]
    status: Literal["pending", "pass", "fail", "ranked"]
    score: float | None = None
    percent_agreement: float | None = None
    mean_ranks: dict[str, float] = Field(default_factory=dict)
    needs_adjudication: bool = False


class ReviewQueue(BaseModel):
    """The queue file. `ratings` grows as raters work; everything else is set up front."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    name: str = "review"
    config: HumanGraderConfig = Field(default_factory=HumanGraderConfig)
    items: list[ReviewItem] = Field(default_factory=list)
    ratings: list[Rating] = Field(default_factory=list)

    @model_validator(mode="after")
    def _valid(self) -> ReviewQueue:
        ids = [item.id for item in self.items]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate item ids: {', '.join(duplicates)}")
        scale = self.config.rating_scale
        for item in self.items:
            if scale.type == "ranking":
                n = len(item.outputs)
                if not scale.min_items <= n <= scale.max_items:
                    raise ValueError(
                        f"item {item.id!r}: a ranking needs {scale.min_items}-{scale.max_items} "
                        f"`outputs`, got {n}"
                    )
            elif item.output is None:
                raise ValueError(f"item {item.id!r}: a {scale.type} item needs an `output`")
        for rating in self.ratings:
            self.check(rating)
        return self

    # --- validation ----------------------------------------------------------------------

    def item(self, item_id: str) -> ReviewItem:
        for item in self.items:
            if item.id == item_id:
                return item
        raise ValueError(f"no item {item_id!r} in queue {self.name!r}")

    def check(self, rating: Rating) -> None:
        """Raises ValueError unless the rating fits the item and the scale."""
        item = self.item(rating.item_id)
        scale = self.config.rating_scale
        if rating.criterion not in scale.criteria_names():
            raise ValueError(
                f"criterion {rating.criterion!r}; valid: {', '.join(scale.criteria_names())}"
            )
        value = rating.value
        if scale.type == "likert":
            low, high = scale.range
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"rating {value!r}: a likert rating is an integer {low}-{high}")
        elif scale.type == "binary":
            if not isinstance(value, bool):
                raise ValueError(f"rating {value!r}: a binary rating is true or false")
        else:
            expected = sorted(o.id for o in item.outputs)
            if not isinstance(value, list) or sorted(value) != expected:
                raise ValueError(
                    f"rating {value!r}: a ranking orders every output of the item once "
                    f"({', '.join(expected)}), best first"
                )

    def add(self, rating: Rating) -> None:
        """Records a rating; a rater's new rating of the same item and criterion replaces
        the old one. The number of raters per item is capped by `max_allowed`."""
        self.check(rating)
        raters = {r.rater for r in self.ratings if r.item_id == rating.item_id}
        limit = self.config.evaluators.max_allowed
        if rating.rater not in raters and len(raters) >= limit:
            raise ValueError(f"item {rating.item_id!r} already has {limit} raters (max_allowed)")
        self.ratings = [
            r
            for r in self.ratings
            if (r.item_id, r.rater, r.criterion) != (rating.item_id, rating.rater, rating.criterion)
        ] + [rating]

    # --- what a rater sees ---------------------------------------------------------------

    def pending_for(self, rater: str) -> list[ReviewItem]:
        """Items this rater has not finished, skipping items that have enough raters."""
        criteria = set(self.config.rating_scale.criteria_names())
        done: dict[str, set[str]] = defaultdict(set)
        raters: dict[str, set[str]] = defaultdict(set)
        for r in self.ratings:
            raters[r.item_id].add(r.rater)
            if r.rater == rater:
                done[r.item_id].add(r.criterion)
        limit = self.config.evaluators.max_allowed
        return [
            item
            for item in self.items
            if done[item.id] != criteria
            and (rater in raters[item.id] or len(raters[item.id]) < limit)
        ]

    def presented_outputs(self, item: ReviewItem, rater: str) -> list[tuple[str, RankedOutput]]:
        """Outputs with the labels this rater sees: in blind mode shuffled per (rater, item)
        and labelled A, B, C...; otherwise in order under their own ids."""
        outputs = list(item.outputs)
        if not self.config.blind_evaluation:
            return [(o.id, o) for o in outputs]
        seed = hashlib.sha256(f"{rater}\0{item.id}".encode()).digest()
        random.Random(seed).shuffle(outputs)
        return [(chr(ord("A") + i), o) for i, o in enumerate(outputs)]

    def visible_metadata(self, item: ReviewItem) -> dict[str, JSON]:
        return {} if self.config.blind_evaluation else dict(item.metadata)

    # --- results -------------------------------------------------------------------------

    def results(self) -> list[ItemResult]:
        return [self.result(item) for item in self.items]

    def result(self, item: ReviewItem) -> ItemResult:
        scale = self.config.rating_scale
        mine = [r for r in self.ratings if r.item_id == item.id]
        raters = sorted({r.rater for r in mine})
        pending = len(raters) < self.config.evaluators.min_required
        threshold = self.config.evaluators.agreement_threshold
        if scale.type == "ranking":
            ranks = _ranks(mine)
            means = {o: sum(v) / len(v) for o, v in ranks.items()}
            agreement = _mean_or_none([percent_agreement(v) for v in ranks.values() if len(v) >= 2])
            return ItemResult(
                item_id=item.id,
                raters=raters,
                status="pending" if pending else "ranked",
                mean_ranks=means,
                percent_agreement=agreement,
                needs_adjudication=agreement is not None and agreement < threshold,
            )
        by_criterion: dict[str, list[float]] = defaultdict(list)
        raw: dict[str, list[object]] = defaultdict(list)
        for r in mine:
            normalised = scale.normalise(r.value)
            if normalised is not None:
                by_criterion[r.criterion].append(normalised)
                raw[r.criterion].append(r.value)
        score = _mean_or_none([sum(v) / len(v) for v in by_criterion.values()])
        # Likert: pairs within one scale point agree ("adjacent agreement"); binary: equal.
        within = 1.0 if scale.type == "likert" else 0.0
        agreement = _mean_or_none([percent_agreement(v, within) for v in raw.values()])
        status: Literal["pending", "pass", "fail"] = "pending"
        if not pending and score is not None:
            status = "pass" if score >= self.config.pass_threshold else "fail"
        return ItemResult(
            item_id=item.id,
            raters=raters,
            status=status,
            score=score,
            percent_agreement=agreement,
            needs_adjudication=agreement is not None and agreement < threshold,
        )

    def agreement(self) -> Agreement:
        """Krippendorff's alpha over every (item, criterion) — for rankings every (item,
        output) — with the scale's metric (nominal for binary, ordinal otherwise)."""
        scale = self.config.rating_scale
        units: dict[Hashable, list[float | int | str | bool]] = defaultdict(list)
        if scale.type == "ranking":
            for item in self.items:
                for output, positions in _ranks(
                    [r for r in self.ratings if r.item_id == item.id]
                ).items():
                    units[(item.id, output)].extend(positions)
        else:
            for r in self.ratings:
                if not isinstance(r.value, list):
                    units[(r.item_id, r.criterion)].append(r.value)
        return krippendorff_alpha(units, scale.metric)


def _ranks(ratings: Sequence[Rating]) -> dict[str, list[int]]:
    ranks: dict[str, list[int]] = defaultdict(list)
    for r in ratings:
        if isinstance(r.value, list):
            for position, output in enumerate(r.value, 1):
                ranks[output].append(position)
    return ranks


def _mean_or_none(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
