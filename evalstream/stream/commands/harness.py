"""`evalstream harness run` and `harness report`: eval-harness suites as a CI gate.

    evalstream harness run --suite SUITE.yaml --outputs OUTPUTS.json [--report out.xml]
    evalstream harness run --suite SUITE.yaml --target cmd:python agent.py --attempts 3
    evalstream harness report --results RESULT.json --format md

The options live here; what they do is `evalstream.stream.grading.harness_run`, imported when a
command runs so that `--help` stays light (tests/cli/test_startup.py).

Exit codes: 0 the gate passed (or failed with `on_failure: warn`); 1 a threshold was missed
and the gate blocks; 2 a usage or input error.
"""

from __future__ import annotations

from typing import Any

import click

# The formats of `evalstream.assertions.harness.report.REPORT_FORMATS` (a unit test keeps them
# equal).
REPORT_FORMATS = ("md", "json", "junit")


@click.group("harness")
def harness_group() -> None:
    """Eval-harness suites: grade outputs or a target, report, gate CI on thresholds."""


@harness_group.command("run")
@click.option(
    "--suite",
    "suite_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="The eval-harness suite (eval_suite: ...) or eval file, YAML or JSON.",
)
@click.option(
    "--target",
    "-t",
    help="Get outputs by running: module:function | path/file.py:function | http(s)://URL | "
    "cmd:COMMAND.",
)
@click.option(
    "--outputs",
    "outputs_path",
    type=click.Path(dir_okay=False),
    help='Recorded outputs instead: JSON {item key: output or {"attempts": [...]}}.',
)
@click.option(
    "--attempts",
    "-k",
    type=int,
    default=1,
    show_default=True,
    help="Runs of the target per item (pass@k, pass^k); with --outputs, the k reported.",
)
@click.option("--category", "categories", multiple=True, help="Only this category or eval type.")
@click.option("--tag", "tags", multiple=True, help="Only items with this tag (repeatable).")
@click.option(
    "--grader-type",
    "grader_types",
    multiple=True,
    type=click.Choice(["code", "model", "human"]),
    help="Only items graded this way (repeatable).",
)
@click.option(
    "--threshold",
    "threshold_flags",
    multiple=True,
    help="METRIC=MINIMUM, e.g. pass_at_1=0.85 (overrides the suite's eval_trigger; repeatable).",
)
@click.option(
    "--on-failure",
    type=click.Choice(["block", "warn"]),
    help="A missed threshold exits 1 (block) or only reports (warn); default: the suite's.",
)
@click.option(
    "--report",
    "reports",
    multiple=True,
    help="Write the report; the format follows the suffix (.md, .json, .xml = JUnit) unless "
    "--format is given (repeatable). Default: the suite's eval_trigger.report_path.",
)
@click.option(
    "--format", "fmt", type=click.Choice(REPORT_FORMATS), help="Format of every --report."
)
@click.option(
    "--reviews",
    "reviews_path",
    type=click.Path(dir_okay=False),
    help="Review queue for human-graded items (created if missing; rate with "
    "`evalstream review rate`).",
)
@click.option("--judge", "judge_spec", help="module:factory returning the model graders' Judge.")
@click.option(
    "--workers",
    type=int,
    help="Graders and target runs at once (default: the suite's max_workers).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds per target run.",
)
@click.option(
    "--sandbox",
    "sandbox_target",
    is_flag=True,
    help="Run a cmd: --target inside the bubblewrap sandbox (see eval --sandbox).",
)
@click.option(
    "--no-sandbox",
    is_flag=True,
    help="Run function_output code without the bubblewrap sandbox (limits only; also "
    "EVALSTREAM_SANDBOX=off). Only for code you trust on this machine.",
)
@click.option("--verbose", "-v", is_flag=True, help="Every item and attempt, not only failures.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress on stderr (default: when stderr is a terminal).",
)
def run_command(**options: Any) -> None:
    """Grade an eval-harness suite and gate on its thresholds (exit 0 pass, 1 blocked, 2 bad
    input)."""
    from evalstream.stream.grading.harness_run import run

    run(**options)  # click's keyword arguments are `run`'s parameters, typed there


@harness_group.command("report")
@click.option(
    "--results",
    required=True,
    type=click.Path(dir_okay=False),
    help="A saved JSON result (harness run --report RESULT.json).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(REPORT_FORMATS),
    help="Output format (default: from --out's suffix, else md).",
)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write here, not stdout.")
def report_command(results: str, fmt: str | None, out: str | None) -> None:
    """Re-render a saved harness result as Markdown, JSON or JUnit XML."""
    from evalstream.stream.grading.harness_run import report

    report(results, fmt, out)


def register(group: click.Group) -> None:
    group.add_command(harness_group)
