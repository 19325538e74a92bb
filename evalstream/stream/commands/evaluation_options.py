"""The options of every command that evaluates suites over episodes (`check`, `up`, `replay`,
the dataset runs): the suites, the pricing table, the close rules and the judge. One
definition, so that the commands take the same flags with the same defaults."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

JUDGE_HELP = (
    "module:factory returning a Judge for llm.judge (default: the Anthropic judge when "
    "ANTHROPIC_API_KEY is set; without either, llm.judge is `error`)."
)

# Each a decorator that adds its option (click makes a new parameter per decorated command).
pricing_option = click.option(
    "--pricing",
    type=click.Path(exists=True, dir_okay=False),
    help="JSON pricing table overriding the built-in one.",
)
# `check` and the dataset runs (`eval run`, `eval matrix`): llm.judge by Message Batches.
judge_batch_options = [
    click.option(
        "--judge-batch",
        is_flag=True,
        help="Ask the judge's questions as one Message Batch (one per dataset run): half the "
        "price, answers within hours (also EVALSTREAM_JUDGE_BATCH=1). An interrupted run "
        "resumes its batch.",
    ),
    click.option(
        "--judge-batch-state",
        type=click.Path(dir_okay=False),
        help="The batch's state file (default: ~/.cache/evalstream/judge-batches/"
        "<questions' hash>.json).",
    ),
]


def evaluation_options(
    *,
    suites_required: bool = True,
    suite_help: str = "Suite YAML file (repeatable).",
    judge_help: str = JUDGE_HELP,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """`--suite`, `--pricing`, `--end-signal`, `--grace-ms`, `--inactivity-ms`, `--reorder-ms`
    and `--judge` (into the parameter `judge_spec`)."""
    options = [
        click.option(
            "--suite",
            "-s",
            "suites",
            multiple=True,
            required=suites_required,
            type=click.Path(dir_okay=False),
            help=suite_help,
        ),
        pricing_option,
        click.option(
            "--end-signal",
            "end_signals",
            multiple=True,
            help="End-signal pattern (default harness:end; repeatable).",
        ),
        click.option(
            "--grace-ms",
            type=float,
            default=2000.0,
            show_default=True,
            help="Wait after the end signal for stragglers.",
        ),
        click.option(
            "--inactivity-ms",
            type=float,
            default=300_000.0,
            show_default=True,
            help="Close an episode after this much silence.",
        ),
        click.option(
            "--reorder-ms",
            type=float,
            default=0.0,
            show_default=True,
            help="Sort signals by (timestamp, seq) within this lateness.",
        ),
        click.option("--judge", "judge_spec", help=judge_help),
    ]

    return with_options(options)


def with_options(
    options: Sequence[Callable[[Any], Any]],
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """One decorator applying `options` in order (the first is the first in `--help`)."""

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate
