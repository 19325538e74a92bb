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
from typing import TYPE_CHECKING, cast

import click

from evalstream.stream.commands.user_error import UserError

if TYPE_CHECKING:
    from evalstream.assertions.graders.kappa import Weighting

# `evalstream.assertions.graders.calibration.DEFAULT_FLOOR` (a unit test keeps them equal): the
# option is declared without loading the statistics.
DEFAULT_FLOOR = 0.6


def register(group: click.Group) -> None:  # noqa: PLR0915 - the commands' declarations
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
        from rich.console import Console

        from evalstream.stream.grading.review_session import rate_queue

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
        from rich.console import Console

        from evalstream.assertions.graders.calibration import disagreement_by_item
        from evalstream.stream.grading.review_calibration import load_judge_scores
        from evalstream.stream.grading.review_session import (
            load_queue,
            ordered_results,
            status_table,
        )

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
        weighting: str | None,
        top: int,
        fmt: str,
        metrics_file: str | None,
        fail_below_floor: bool,
    ) -> None:
        """The LLM judge against the human grades of QUEUE: Cohen's kappa per rubric with a
        95% CI, the confusion matrix and the items they disagree on most."""
        from rich.console import Console

        from evalstream.assertions.graders.calibration import calibrate
        from evalstream.stream.grading.review_calibration import (
            calibration_table,
            load_judge_scores,
            write_agreement_metrics,
        )
        from evalstream.stream.grading.review_session import load_queue

        loaded = load_queue(queue)
        if loaded.config.rating_scale.type == "ranking":
            raise UserError(
                f"{queue}: a ranking queue has no per-item grade to compare with a judge score; "
                "calibrate against a likert or binary queue"
            )
        scores = load_judge_scores(judge_path, loaded)
        chosen = cast("Weighting | None", weighting)  # one of the click.Choice values
        results = calibrate(loaded, scores, floor=floor, weighting=chosen)
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
