"""The options of every command that evaluates suites over episodes (`check`, `up`, `replay`):
the suites, the pricing table, the close rules and the judge. One definition, so that the
commands take the same flags with the same defaults."""

from __future__ import annotations

from collections.abc import Callable

import click

JUDGE_HELP = (
    "module:factory returning a Judge for llm.judge (default: the Anthropic judge when "
    "ANTHROPIC_API_KEY is set; without either, llm.judge is `error`)."
)


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
        click.option(
            "--pricing",
            type=click.Path(exists=True, dir_okay=False),
            help="JSON pricing table overriding the built-in one.",
        ),
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

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate
