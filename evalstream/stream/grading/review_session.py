"""The human grading queue in the terminal: showing items, asking for ratings, saving the
queue after every answer, and the status table with inter-rater agreement
(`evalstream review`, evalstream/stream/commands/review.py)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from evalstream.assertions.graders.calibration import disagreement_by_item, disagreements_first
from evalstream.assertions.graders.human_review import (
    ItemResult,
    Rating,
    RatingValue,
    ReviewItem,
    ReviewQueue,
)
from evalstream.assertions.judge.prompt import as_text
from evalstream.stream.commands.user_error import UserError
from evalstream.stream.grading.review_calibration import load_judge_scores

JSON = Any


class _QuitRequested(Exception):  # noqa: N818 - control flow, not an error
    """The rater typed `q`: stop after saving what was rated."""


def load_queue(path: str) -> ReviewQueue:
    try:
        return ReviewQueue.model_validate_json(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read review queue {path}: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "<top>"
        message = str(err["msg"]).removeprefix("Value error, ")
        raise UserError(f"{path}: {where}: {message}") from exc


def save_queue(queue: ReviewQueue, path: str) -> None:
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(queue.model_dump_json(indent=2) + "\n", "utf-8")
    os.replace(temporary, target)


def _show(console: Console, queue: ReviewQueue, item: ReviewItem, rater: str, left: int) -> None:
    config = queue.config
    console.rule(f"[bold]{item.id}[/bold]  ({left} left)")
    if config.rubric:
        console.print(Panel(config.rubric, title="Rubric", border_style="cyan"))
    if item.input is not None:
        console.print(Panel(as_text(item.input), title="Input"))
    metadata = queue.visible_metadata(item)
    if metadata:
        console.print(Panel(as_text(metadata), title="Metadata", border_style="dim"))
    if config.rating_scale.type == "ranking":
        for label, output in queue.presented_outputs(item, rater):
            console.print(Panel(output.text, title=f"Output {label}"))
    else:
        console.print(Panel(item.output or "", title="Output", border_style="green"))


def _ask(
    console: Console, queue: ReviewQueue, item: ReviewItem, rater: str, criterion: str
) -> RatingValue | None:
    """One answer; None to skip the item. Re-asks until the answer is valid."""
    scale = queue.config.rating_scale
    question = criterion if criterion != "overall" else "Rating"
    while True:
        if scale.type == "likert":
            low, high = scale.range
            for value in range(low, high + 1):
                if value in scale.labels:
                    console.print(f"  {value} = {scale.labels[value]}")
            prompt = f"{question} [{low}-{high}, s=skip, q=quit]"
        elif scale.type == "binary":
            options = " / ".join(f"{'p' if o.value else 'f'} = {o.label}" for o in scale.options)
            prompt = f"{question} [{options or 'p = Pass / f = Fail'}, s=skip, q=quit]"
        else:
            labels = " ".join(label for label, _ in queue.presented_outputs(item, rater))
            prompt = f"Order best first, e.g. '{labels}' [s=skip, q=quit]"
        answer = str(click.prompt(prompt, prompt_suffix=": ")).strip()
        if answer.lower() == "q":
            raise _QuitRequested
        if answer.lower() == "s":
            return None
        parsed = _parse(queue, item, rater, answer)
        if parsed is not None:
            return parsed
        console.print(f"[red]not a valid answer: {answer!r}[/red]")


def _parse(queue: ReviewQueue, item: ReviewItem, rater: str, answer: str) -> RatingValue | None:
    scale = queue.config.rating_scale
    if scale.type == "likert":
        if answer.isdigit() and scale.range[0] <= int(answer) <= scale.range[1]:
            return int(answer)
        return None
    if scale.type == "binary":
        return {"p": True, "pass": True, "y": True, "f": False, "fail": False, "n": False}.get(
            answer.lower()
        )
    presented = dict(queue.presented_outputs(item, rater))
    labels = answer.upper().replace(",", " ").split()
    if sorted(labels) != sorted(presented):
        return None
    return [presented[label].id for label in labels]


def rate_queue(
    path: str,
    rater: str,
    limit: int | None,
    console: Console,
    *,
    judge_path: str | None = None,
) -> int:
    """Rates the items `rater` has not rated; with judge scores, the items the judge and the
    human grade disagree on most come first (the judge's score itself is never shown)."""
    queue = load_queue(path)
    pending = queue.pending_for(rater)
    if judge_path is not None:
        distances = disagreement_by_item(queue, load_judge_scores(judge_path, queue))
        by_id = {item.id: item for item in pending}
        pending = [by_id[i] for i in disagreements_first(list(by_id), distances)]
    if limit is not None:
        pending = pending[:limit]
    rated = 0
    try:
        for left, item in zip(range(len(pending), 0, -1), pending, strict=True):
            _show(console, queue, item, rater, left)
            started = time.monotonic()
            for criterion in queue.config.rating_scale.criteria_names():
                value = _ask(console, queue, item, rater, criterion)
                if value is None:
                    break
                queue.add(
                    Rating(
                        item_id=item.id,
                        rater=rater,
                        criterion=criterion,
                        value=value,
                        rated_at=datetime.now(UTC).isoformat(timespec="seconds"),
                        seconds=round(time.monotonic() - started, 1),
                    )
                )
                save_queue(queue, path)
                rated += 1
    except _QuitRequested:
        console.print("stopped; ratings so far are saved")
    return rated


def ordered_results(
    queue: ReviewQueue, distances: dict[str, float] | None, *, first: bool
) -> list[ItemResult]:
    results = queue.results()
    if distances is None or not first:
        return results
    by_id = {r.item_id: r for r in results}
    return [by_id[i] for i in disagreements_first(list(by_id), distances)]


def status_table(
    queue: ReviewQueue,
    console: Console,
    distances: dict[str, float] | None = None,
    *,
    first: bool = False,
) -> None:
    table = Table(title=f"review queue: {queue.name}")
    columns = ["item", "raters", "status", "score", "agreement", "adjudicate"]
    for column in columns + (["judge distance"] if distances is not None else []):
        table.add_column(column)
    for r in ordered_results(queue, distances, first=first):
        score = "" if r.score is None else f"{r.score:.2f}"
        if r.mean_ranks:
            score = ", ".join(f"{k}:{v:.1f}" for k, v in sorted(r.mean_ranks.items()))
        agreement = "" if r.percent_agreement is None else f"{r.percent_agreement:.0%}"
        row = [
            r.item_id,
            str(len(r.raters)),
            r.status,
            score,
            agreement,
            "yes" if r.needs_adjudication else "",
        ]
        if distances is not None:
            distance = distances.get(r.item_id)
            row.append("" if distance is None else f"{distance:g}")
        table.add_row(*row)
    console.print(table)
    alpha = queue.agreement()
    threshold = queue.config.evaluators.agreement_threshold
    if alpha.alpha is None:
        console.print(
            f"Krippendorff's alpha ({alpha.metric}): undefined ({alpha.units} units with two "
            "or more ratings; no variation or too few ratings)"
        )
    else:
        verdict = "meets" if alpha.alpha >= threshold else "BELOW"
        console.print(
            f"Krippendorff's alpha ({alpha.metric}) = {alpha.alpha:.3f} over {alpha.units} "
            f"units: {verdict} the agreement threshold {threshold:g}"
        )
