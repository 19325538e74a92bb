"""`evalstream review`: the human grading queue in the terminal.

    evalstream review rate QUEUE.json --rater NAME   rate the items NAME has not rated yet
    evalstream review status QUEUE.json              results per item and inter-rater agreement

Ratings are saved to the queue file after every answer (atomically), so a session can stop
at any time (`q`) and resume later. In blind mode (`blind_evaluation: true`) metadata is
hidden and ranked outputs are shuffled and relabelled A, B, C... per rater.
"""

from __future__ import annotations

import json

import click


def register(group: click.Group) -> None:
    @group.group()
    def review() -> None:
        """Human grading: rate a review queue in the terminal, see results and agreement."""

    @review.command()
    @click.argument("queue", type=click.Path(dir_okay=False))
    @click.option("--rater", required=True, help="Your name, as recorded with each rating.")
    @click.option("--limit", type=int, default=None, help="Rate at most this many items.")
    def rate(queue: str, rater: str, limit: int | None) -> None:
        """Rate the items of QUEUE (a JSON file) you have not rated yet."""
        from rich.console import Console

        from stream.review_session import rate_queue

        console = Console()
        rated = rate_queue(queue, rater.strip(), limit, console)
        console.print(f"{rated} ratings saved to {queue}")

    @review.command()
    @click.argument("queue", type=click.Path(dir_okay=False))
    @click.option(
        "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
    )
    def status(queue: str, fmt: str) -> None:
        """Results per item and Krippendorff's alpha for QUEUE."""
        from rich.console import Console

        from stream.review_session import load_queue, status_table

        loaded = load_queue(queue)
        if fmt == "json":
            payload = {
                "items": [r.model_dump() for r in loaded.results()],
                "agreement": loaded.agreement().to_json(),
                "agreement_threshold": loaded.config.evaluators.agreement_threshold,
            }
            click.echo(json.dumps(payload, indent=2))
        else:
            status_table(loaded, Console())
