"""`evalstream review`: the human grading queue in the terminal.

    evalstream review rate QUEUE.json --rater NAME   rate the items NAME has not rated yet
    evalstream review status QUEUE.json              results per item and inter-rater agreement
    evalstream review calibration QUEUE.json --judge RESULTS.json
                                                     the LLM judge against the human grades:
                                                     Cohen's kappa per rubric, disagreements first
    rate / status ... --judge RESULTS.json --disagreements-first
                                                     the items the judge and humans disagree on
                                                     most first

Ratings are saved to the queue file after every answer (atomically), so a session can stop
at any time (`q`) and resume later. In blind mode (`blind_evaluation: true`) metadata is
hidden and ranked outputs are shuffled and relabelled A, B, C... per rater.
"""

from __future__ import annotations

import json
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

from assertions.graders.calibration import (
    DEFAULT_FLOOR,
    calibrate,
    disagreement_by_item,
    disagreements_first,
)
from assertions.graders.human_review import (
    ItemResult,
    Rating,
    RatingValue,
    ReviewItem,
    ReviewQueue,
)
from assertions.graders.kappa import Weighting
from assertions.judge.prompt import as_text
from stream.commands.review_calibration import (
    calibration_table,
    load_judge_scores,
    write_agreement_metrics,
)
from stream.commands.user_error import UserError

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


def register(group: click.Group) -> None:
    @group.group()
    def review() -> None:
        """Human grading: rate a review queue in the terminal, see results and agreement."""

    @review.command()
    @click.argument("queue", type=click.Path(dir_okay=False))
    @click.option("--rater", required=True, help="Your name, as recorded with each rating.")
    @click.option("--limit", type=int, default=None, help="Rate at most this many items.")
    @click.option(
        "--judge",
        "judge_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Judge scores of the items (as for `review calibration`).",
    )
    @click.option(
        "--disagreements-first",
        "first",
        is_flag=True,
        help="With --judge: the items the judge and the human grade disagree on most first "
        "(the judge's score is not shown).",
    )
    def rate(
        queue: str, rater: str, limit: int | None, judge_path: str | None, first: bool
    ) -> None:
        """Rate the items of QUEUE (a JSON file) you have not rated yet."""
        if first and judge_path is None:
            raise UserError("--disagreements-first needs --judge JUDGE_RESULTS to compare with")
        console = Console()
        rated = rate_queue(
            queue, rater.strip(), limit, console, judge_path=judge_path if first else None
        )
        console.print(f"{rated} ratings saved to {queue}")

    @review.command()
    @click.argument("queue", type=click.Path(dir_okay=False))
    @click.option(
        "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
    )
    @click.option(
        "--judge",
        "judge_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Judge scores of the items (as for `review calibration`): adds each item's "
        "largest judge-human distance.",
    )
    @click.option(
        "--disagreements-first",
        "first",
        is_flag=True,
        help="With --judge: the items the judge and the human grade disagree on most first.",
    )
    def status(queue: str, fmt: str, judge_path: str | None, first: bool) -> None:
        """Results per item and Krippendorff's alpha for QUEUE."""
        loaded = load_queue(queue)
        if first and judge_path is None:
            raise UserError("--disagreements-first needs --judge JUDGE_RESULTS to compare with")
        distances = None
        if judge_path is not None:
            distances = disagreement_by_item(loaded, load_judge_scores(judge_path, loaded))
        results = ordered_results(loaded, distances, first=first)
        if fmt == "json":
            items = [r.model_dump() for r in results]
            if distances is not None:
                for item in items:
                    item["judge_distance"] = distances.get(item["item_id"])
            payload = {
                "items": items,
                "agreement": loaded.agreement().to_json(),
                "agreement_threshold": loaded.config.evaluators.agreement_threshold,
            }
            click.echo(json.dumps(payload, indent=2))
        else:
            status_table(loaded, Console(), distances, first=first)

    @review.command()
    @click.argument("queue", type=click.Path(dir_okay=False))
    @click.option(
        "--judge",
        "judge_path",
        required=True,
        type=click.Path(dir_okay=False),
        help="Judge scores of the queue's items: JSON or JSON Lines records "
        "{item_id, criterion, value | score}.",
    )
    @click.option(
        "--floor",
        type=click.FloatRange(-1, 1),
        default=DEFAULT_FLOOR,
        show_default=True,
        help="Flag a rubric whose kappa is below this.",
    )
    @click.option(
        "--weighting",
        type=click.Choice(["quadratic", "linear", "unweighted"]),
        default=None,
        help="Kappa weights [default: quadratic for likert, unweighted for binary].",
    )
    @click.option("--top", type=click.IntRange(0), default=10, show_default=True)
    @click.option(
        "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
    )
    @click.option(
        "--metrics-file",
        type=click.Path(dir_okay=False),
        default=None,
        help="Also write evalstream_judge_human_agreement{rubric} and its floor flag here "
        "(Prometheus text format).",
    )
    @click.option(
        "--fail-below-floor", is_flag=True, help="Exit 1 when a rubric is below the floor."
    )
    def calibration(
        queue: str,
        *,
        judge_path: str,
        floor: float,
        weighting: Weighting | None,
        top: int,
        fmt: str,
        metrics_file: str | None,
        fail_below_floor: bool,
    ) -> None:
        """The LLM judge against the human grades of QUEUE: Cohen's kappa per rubric with a
        95% CI, the confusion matrix and the items they disagree on most."""
        loaded = load_queue(queue)
        if loaded.config.rating_scale.type == "ranking":
            raise UserError(
                f"{queue}: a ranking queue has no per-item grade to compare with a judge score; "
                "calibrate against a likert or binary queue"
            )
        scores = load_judge_scores(judge_path, loaded)
        results = calibrate(loaded, scores, floor=floor, weighting=weighting)
        if metrics_file is not None:
            write_agreement_metrics(results, metrics_file)
        if fmt == "json":
            rubrics = [c.to_json() for c in results]
            for entry in rubrics:
                entry["disagreements"] = entry["disagreements"][:top]
            click.echo(json.dumps({"queue": loaded.name, "rubrics": rubrics}, indent=2))
        else:
            if not results:
                click.echo("no judge scores to compare")
            calibration_table(loaded, results, top, Console())
        if fail_below_floor and any(c.below_floor for c in results):
            raise SystemExit(1)
