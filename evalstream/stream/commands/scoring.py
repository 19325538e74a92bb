"""The episode-store workflow's commands: `status`, `score`, `report` and `nightly`
(docs/scoring.md).

Exit codes: 0 every episode passed; 1 an episode failed (a CRITICAL alert or a failed
assertion) — for `nightly`, a CRITICAL alert or regression; 2 a usage or input error,
episodes that were rejected as bad input (they are listed in the results), or — for `score`
— nothing scored or no suite assertion applied (unless --allow-empty).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from evalstream.assertions.errors import InputError, WrongFileKindError
from evalstream.stream.batch_gc import full_collections_deferred
from evalstream.stream.commands.user_error import UserError

# The handlers import what they run (scoring, the store's HTTP client) when they run.
if TYPE_CHECKING:
    from evalstream.assertions.scores.run import ScoreRun
    from evalstream.stream.score_sweep import ScoreSettings

T = TypeVar("T")
DEFAULT_STORE = "http://localhost:8100"


REPORT_FORMATS = ("markdown", "json", "junit", "html")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine; input and store errors become one-line user errors (exit 2)."""
    import asyncio

    from evalstream.connectors.episode_store import EpisodeStoreError
    from evalstream.stream.process_shards import ShardError

    # The result goes round the task: when asyncio.run restores the SIGINT handler, Python
    # 3.11 formats the repr of the finished main task, result included (an enum lookup's
    # error message) -- for a whole score run, every record's dataclass repr.
    results: list[T] = []

    async def keep_result() -> None:
        results.append(await coro)

    try:
        asyncio.run(keep_result())
    except (InputError, EpisodeStoreError, ShardError) as exc:
        raise UserError(str(exc)) from exc
    return results[0]


def _now() -> datetime:
    return datetime.now(UTC)


def score_options(func: Callable[..., None]) -> Callable[..., None]:
    """Options shared by `score` and `nightly`: source filters, suites, baseline, rules."""
    options = [
        click.option("--store-url", help="Episode store to read from (instead of files)."),
        click.option("--agent-id", help="Only episodes of this agent."),
        click.option("--model", help="Only episodes that used this model."),
        click.option(
            "--status",
            type=click.Choice(["success", "failure", "timeout", "killed"]),
            help="Only episodes with this final status.",
        ),
        click.option("--since", help="Episodes started after: a duration (24h, 90m) or ISO time."),
        click.option("--until", help="Episodes started before: a duration or ISO time."),
        click.option("--timeout", "timeout_s", type=float, help="Store request timeout (s)."),
        click.option(
            "--progress",
            is_flag=True,
            help="A progress line on stderr while reading the store (default: when a terminal).",
        ),
        click.option(
            "--suite",
            "-s",
            "suites",
            multiple=True,
            type=click.Path(dir_okay=False),
            help="Suite YAML whose assertions decide correctness (repeatable).",
        ),
        click.option(
            "--pricing",
            type=click.Path(exists=True, dir_okay=False),
            help="Pricing table JSON for suite assertions (episode costs come from the store).",
        ),
        click.option(
            "--judge",
            help="module:factory returning a Judge for the suites' llm.judge (default: the "
            "Anthropic judge when ANTHROPIC_API_KEY is set).",
        ),
        click.option(
            "--baseline",
            "baseline_file",
            type=click.Path(dir_okay=False),
            help="Fixed baselines file (JSON; see docs/scoring.md).",
        ),
        click.option(
            "--baseline-run",
            help="Episodes whose metadata.run_id is this are the baseline.",
        ),
        click.option(
            "--rolling",
            "rolling_window",
            type=int,
            help="Rolling baseline over the last N episodes per key (the default mode; 20).",
        ),
        click.option(
            "--baseline-state",
            type=click.Path(dir_okay=False),
            help="Load and save the rolling baseline here (consecutive runs continue it).",
        ),
        click.option(
            "--no-baseline",
            is_flag=True,
            help="Score without a baseline (cost, latency and tool match unscored).",
        ),
        click.option(
            "--rules",
            "rules_file",
            type=click.Path(exists=True, dir_okay=False),
            help="YAML/JSON with `alert_rules`, `scoring`, `regression` settings.",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            help="Processes scoring episode files, split by agent (default: every core for "
            "files of 8 MB or more, without suites or --baseline-state).",
        ),
        click.option(
            "--keep-unknown-steps",
            is_flag=True,
            help="Keep steps of an unknown type as inert signals instead of rejecting the episode.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _settings_values(
    files: tuple[str, ...],
    *,
    baseline_file: str | None,
    baseline_run: str | None,
    no_baseline: bool,
    rules_file: str | None,
    keep_unknown_steps: bool,
    progress: bool,
    **given: Any,
) -> dict[str, Any]:
    chosen = [
        name
        for name, on in (
            ("--baseline", baseline_file),
            ("--baseline-run", baseline_run),
            ("--no-baseline", no_baseline),
        )
        if on
    ]
    if len(chosen) > 1:
        raise UserError(f"{' and '.join(chosen)} exclude each other: choose one baseline")
    values: dict[str, Any] = {k: v for k, v in given.items() if v is not None and v != ()}
    if files:
        values["files"] = list(files)
    if baseline_file:
        values.update(baseline="file", baseline_file=baseline_file)
    elif baseline_run:
        values.update(baseline="run", baseline_run=baseline_run)
    elif no_baseline:
        values["baseline"] = "none"
    if "suites" in values:
        values["suites"] = list(values["suites"])
    if keep_unknown_steps:
        values["unknown_steps"] = "keep"
    if progress or sys.stderr.isatty():
        values["progress"] = True
    if rules_file:
        values.update(_rules_file(rules_file))
    return values


def _rules_file(path: str) -> dict[str, Any]:
    import yaml  # only for this option

    try:
        obj = yaml.safe_load(Path(path).read_text("utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"{path}: cannot read the rules file: {exc}") from exc
    allowed = {"alert_rules", "scoring", "regression"}
    if not isinstance(obj, dict) or not set(obj) <= allowed:
        raise UserError(f"{path}: a rules file is a mapping with keys {', '.join(sorted(allowed))}")
    return obj


def _summary_lines(run: ScoreRun, s: dict[str, Any]) -> list[str]:
    from evalstream.assertions.scores.run import SCORE_NAMES

    means = s["mean_scores"]
    shown = ", ".join(
        f"{name} {means[name]:.3f}" for name in SCORE_NAMES if means.get(name) is not None
    )
    alerts = s["alerts"]
    lines = [
        f"{s['passed']}/{s['episodes']} episodes passed; {s['critical_episodes']} with a "
        f"CRITICAL alert, {s['warning_episodes']} with WARNINGs only; "
        f"{s['without_baseline']} without a baseline; {s['rejected']} rejected, "
        f"{s['skipped']} skipped",
        f"mean scores: {shown or '—'}",
    ]
    for severity in ("critical", "warning"):
        if alerts[severity]:
            per_dim = ", ".join(f"{d} {n}" for d, n in sorted(alerts[severity].items()))
            lines.append(f"{severity.upper()} alerts: {per_dim}")
    firing = [r for r in run.regressions if r.state.value == "firing"]
    if firing:
        lines.append(f"windowed regressions fired: {len(firing)}")
        lines += [f"  {r.severity.value.upper()} {r.message}" for r in firing]
    return lines


@click.command()
@click.option("--store-url", default=DEFAULT_STORE, show_default=True)
@click.option("--timeout", "timeout_s", type=float, default=10.0, show_default=True)
def status(store_url: str, timeout_s: float) -> None:
    """Check the connection to an episode store (episode-store workflow)."""
    from evalstream.connectors.episode_store import EpisodeStoreClient

    async def check() -> None:
        async with EpisodeStoreClient(store_url, timeout_s=timeout_s) as store:
            health = await store.health()
        stored = "?" if health.episodes_stored is None else str(health.episodes_stored)
        click.echo(
            f"episode store {store_url}: {health.status} "
            f"({health.service or 'unknown service'} {health.version or ''}".rstrip()
            + f"), {stored} episodes stored"
        )
        if not health.ok:
            raise UserError(f"episode store {store_url} reports status {health.status!r}")

    _run(check())


@click.command()
@score_options
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--limit", type=int, help="At most this many episodes (default 50).")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the results JSON (kind score-run) here.",
)
@click.option(
    "--markdown",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write the Markdown report here.",
)
@click.option(
    "--save-baseline",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the scored episodes' per-key summary here, a baseline file for --baseline.",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Exit 0 even when nothing was scored, or no suite assertion applied (else exit 2).",
)
def score(
    files: tuple[str, ...],
    output: str | None,
    markdown: str | None,
    save_baseline: str | None,
    allow_empty: bool,
    **options: Any,
) -> None:
    """Score episodes (from FILES or --store-url) against a baseline on five dimensions.

    FILES hold episode-store episodes: NDJSON (the store's export) or JSON (an episode, a
    list, or {"episodes": [...]}).
    """
    import orjson

    from evalstream.assertions.reports.score_report import render_run_markdown
    from evalstream.assertions.reports.score_run_json import write_score_run_json
    from evalstream.assertions.scores.run import baselines_of
    from evalstream.stream.score_sweep import ScoreSettings, StreamPlan, score_episodes

    values = _settings_values(files, **options)
    try:
        settings = ScoreSettings.build(values)
    except InputError as exc:
        raise UserError(str(exc)) from exc
    with full_collections_deferred(), contextlib.ExitStack() as scratch:
        # Without a baseline to make of every episode, none is kept once scored: episodes
        # are sorted, and their records wait, in a scratch directory (beside the results
        # file, which is about as big) until written; a report's few are picked as they go.
        stream = None
        if not save_baseline:
            stream = StreamPlan(
                _scratch_dir(scratch, output),
                records=output is not None,
                listed=markdown is not None,
            )
        run = _run(score_episodes(settings, now=_now(), stream=stream))
        summary = run.summary()
        if output:
            write_score_run_json(output, run, summary)
        if markdown:
            Path(markdown).write_text(render_run_markdown(run, summary), encoding="utf-8")
    if save_baseline:
        try:
            saved = baselines_of(run, source=f"score-run:{run.created_at}")
        except InputError as exc:
            raise UserError(str(exc)) from exc
        Path(save_baseline).write_bytes(
            orjson.dumps(saved.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
        )
    for line in _summary_lines(run, summary):
        click.echo(line)
    for rejected in run.rejected:
        click.echo(f"error: {rejected.message}", err=True)
    empty = None if allow_empty else _nothing_evaluated(run, settings)
    if empty is not None:
        click.echo(f"error: {empty}; pass --allow-empty if that is expected", err=True)
        sys.exit(2)
    sys.exit(run.exit_code(summary))


def _scratch_dir(scratch: contextlib.ExitStack, output: str | None) -> str:
    """A directory beside `output` (else the system's temporary directory) that `scratch`
    removes on leaving."""
    import tempfile

    where = Path(output).absolute().parent if output else None
    try:
        made = tempfile.TemporaryDirectory(prefix=".evalstream-score-", dir=where)
    except OSError as exc:
        if output is None:
            raise UserError(f"cannot make a scratch directory: {exc}; set TMPDIR") from exc
        raise UserError(
            f"cannot write beside the results file {output}: {exc.strerror or exc}; "
            "pass an --output path in a directory that exists and is writable"
        ) from exc
    return scratch.enter_context(made)


def _nothing_evaluated(run: ScoreRun, settings: ScoreSettings) -> str | None:
    """Why the run evaluated nothing, naming the likely cause; None when it evaluated some.
    (Rejected episodes already exit 2 with their own messages.)"""
    if run.rejected:
        return None
    if not run.episode_count:
        if settings.store_url is not None:
            given = {k: v for k, v in run.source.get("filters", {}).items() if v is not None}
            where = f"the store returned no episode for the filters {given}"
        else:
            where = "the files hold no episode that passes the filters (an empty file?)"
        running = f"; {len(run.skipped)} still running" if run.skipped else ""
        return f"nothing was scored: {where}{running}"
    if settings.suites and not run.evaluated_count:
        attrs = run.first_attrs or {}
        first = ", ".join(f"{k}={attrs.get(k)!r}" for k in ("agent_id", "case_id"))
        return (
            f"nothing was evaluated: no assertion of the suites applied to any of the "
            f"{run.episode_count} episode(s) (check the suites' `match:` and case ids against "
            f"the episodes; the first has {first})"
        )
    return None


@click.command()
@click.argument("results", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--format",
    "-f",
    "fmt",
    type=click.Choice(REPORT_FORMATS),
    default="markdown",
    show_default=True,
    help="markdown and json for every kind; junit and html for dataset runs and comparisons.",
)
@click.option("--out", "-o", type=click.Path(dir_okay=False, writable=True))
def report(results: str, fmt: str, out: str | None) -> None:
    """Render a results file: of `evalstream score` (kind score-run), or of `eval`, `matrix`
    and `compare` (dataset runs, matrix runs, comparisons)."""
    import orjson

    from evalstream.assertions.evalruns.reports import is_eval_run, render_eval_report
    from evalstream.assertions.file_kinds import FileKind
    from evalstream.assertions.reports.score_report import FORMATS, render_score_report
    from evalstream.connectors.files.file_kinds import expecting, raise_if_other_kind

    readable = (FileKind.SCORE_RUN, FileKind.EVAL_RUN)
    try:
        obj = orjson.loads(Path(results).read_bytes())
    except orjson.JSONDecodeError as exc:
        try:
            raise_if_other_kind(results, readable)
        except WrongFileKindError as wrong:
            raise UserError(str(wrong)) from exc
        raise UserError(f"{results}: not valid JSON: {exc}") from exc
    try:
        if is_eval_run(obj):
            text = render_eval_report(obj, "md" if fmt == "markdown" else fmt)
        elif fmt in FORMATS:
            with expecting(results, readable):
                text = render_score_report(obj, fmt)
        else:
            raise InputError(
                f"format {fmt!r} is for dataset runs; a score run renders as {' or '.join(FORMATS)}"
            )
    except WrongFileKindError as exc:
        raise UserError(str(exc)) from exc
    except InputError as exc:
        raise UserError(f"{results}: {exc}") from exc
    if out:
        Path(out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


@click.command()
@score_options
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Nightly settings YAML (flags override it).",
)
@click.option("--out-dir", help="Directory for the reports (default ./reports).")
@click.option("--limit", type=int, help="At most this many episodes (default: all).")
@click.option(
    "--fail-on",
    type=click.Choice(["critical", "failed", "never"]),
    help="Exit 1 on a CRITICAL alert (default), on any failed episode, or never.",
)
def nightly(config_file: str | None, **options: Any) -> None:
    """A sweep for cron: score the last --since (24h) of the store, write JSON and
    Markdown reports into --out-dir, exit 1 on CRITICAL."""
    from evalstream.stream.score_sweep import NightlySettings, run_nightly

    values = _settings_values((), **options)
    try:
        settings = NightlySettings.load(config_file, values)
    except InputError as exc:
        raise UserError(str(exc)) from exc
    with full_collections_deferred():
        result = _run(run_nightly(settings, now=_now()))
    for line in _summary_lines(result.run, result.run.summary()):
        click.echo(line)
    click.echo(f"reports: {result.json_path} {result.markdown_path}")
    for rejected in result.run.rejected:
        click.echo(f"error: {rejected.message}", err=True)
    sys.exit(result.exit_code)


def register(group: click.Group) -> None:
    for command in (status, score, report, nightly):
        group.add_command(command)
