"""Human-graded items into the review queue that `evalstream review rate` works through.

A harness run puts each human-graded item that has an output (its first attempt) and is not in
the queue yet into it, under the item key; items already there keep their output and ratings.
A new queue takes the first human item's grader configuration (scale, raters, rubric). Until
enough raters rated an item, grading reports it `pending`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from evalstream.assertions.graders.human_review import HumanGraderConfig, ReviewItem, ReviewQueue
from evalstream.assertions.harness.grading import OutputError, attempts_of
from evalstream.assertions.harness.models import EvalItem

JSON = Any


def new_queue(name: str, items: Sequence[EvalItem]) -> ReviewQueue:
    config = next((i.grader for i in items if isinstance(i.grader, HumanGraderConfig)), None)
    return ReviewQueue(name=name, config=config or HumanGraderConfig())


def _task(item: EvalItem) -> JSON:
    return item.input.get("content") if isinstance(item.input, dict) else item.input


def enqueue_human_items(
    queue: ReviewQueue, items: Sequence[EvalItem], outputs: Mapping[str, JSON]
) -> list[str]:
    """Adds the human items with an output that the queue lacks; returns their keys. Ranking
    queues need several outputs per item and are filled by hand, so nothing is added to them."""
    if queue.config.rating_scale.type == "ranking":
        return []
    known = {review.id for review in queue.items}
    added = []
    for item in items:
        if item.grader_type != "human" or item.key in known or item.key not in outputs:
            continue
        first = attempts_of(outputs[item.key])[0]
        if isinstance(first, OutputError):
            continue
        text = first if isinstance(first, str) else json.dumps(first, sort_keys=True)
        queue.items.append(ReviewItem(id=item.key, input=_task(item), output=text))
        added.append(item.key)
    return added
