"""`evalstream eval`, `matrix`, `compare` and `eval-report`: dataset runs as a CI gate.

Exit codes: 0 the gate passed; 1 the gate failed (a case failed or errored, a threshold
profile was not met, or the comparison with the baseline blocks — baseline cases missing
from the candidate block unless --allow-removed); 2 a usage or input error (runs of
different datasets compared included); 130 interrupted (Ctrl-C) after saving what finished.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from evalstream.assertions.errors import InputError
from evalstream.assertions.evalruns.choices import PROFILE_NAMES, REPORT_FORMATS
from evalstream.stream.commands.evaluation_options import (
    JUDGE_HELP,
    judge_batch_options,
    pricing_option,
    with_options,
)
from evalstream.stream.commands.user_error import UserError

# The handlers import the run models, runners and judge when they run: `--help` stays light.
if TYPE_CHECKING:
    from evalstream.assertions.evalruns.compare import CompareOptions, Comparison, FailOn
    from evalstream.assertions.evalruns.models import DatasetResult
    from evalstream.assertions.evalruns.profiles import PassHat, ProfileCheck, ThresholdProfile
    from evalstream.assertions.evalruns.reports import EvalDocument
    from evalstream.assertions.judge.protocol import Judge
    from evalstream.assertions.suite_format.suites import Suite
    from evalstream.assertions.wire.pricing import PricingTable
    from evalstream.stream.evalruns.matrix import MatrixRunner
    from evalstream.stream.evalruns.progress import RichProgress
    from evalstream.stream.evalruns.runner import DatasetRunner, RunSettings

T = TypeVar("T")
EXIT_INTERRUPTED = 130
ALLOW_REMOVED_HELP = (
    "Do not block when baseline cases were not evaluated in the candidate (a subset run)."
)
REPORT_EXTENSIONS = {
    ".md": "md",
    ".markdown": "md",
    ".json": "json",
    ".xml": "junit",
    ".html": "html",
    ".htm": "html",
}


def _load_suite(path: str) -> Suite:
    from evalstream.assertions.file_kinds import FileKind
    from evalstream.assertions.suite_format.suites import load_suite
    from evalstream.connectors.files.file_kinds import expecting

    try:
        with expecting(path, FileKind.SUITE):
            return load_suite(path)
    except InputError as exc:
        raise UserError(str(exc)) from exc


def _pricing(path: str | None) -> PricingTable:
    from evalstream.assertions.wire.pricing import default_pricing, load_pricing

    try:
        return load_pricing(Path(path)) if path else default_pricing()
    except InputError as exc:
        raise UserError(str(exc)) from exc


def _judge(
    spec: str | None, pricing: PricingTable, batch: bool = False, batch_state: str | None = None
) -> Judge | None:
    """`--judge module:factory`, else the Anthropic judge of the environment (one Message
    Batch per run with `--judge-batch`), else none."""
    from evalstream.stream.judge import judge_from

    try:
        return judge_from(
            spec, pricing=pricing, batchable=True, batch=batch, batch_state=batch_state
        )
    except InputError as exc:
        raise UserError(str(exc)) from exc


def _config(pairs: tuple[str, ...]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--config {pair!r}: expected KEY=VALUE, e.g. --config model=haiku")
        out[key] = yaml.safe_load(raw) if raw else ""
    return out


def _echo_judge_usage(judge: Judge | None) -> None:
    """The judge's spend and prompt-cache saving, when it keeps them and was asked."""
    from evalstream.stream.offline import judge_usage

    usage = judge_usage(judge)
    if usage is not None:
        click.echo(usage.summary())


def _report_format(path: str) -> str:
    fmt = REPORT_EXTENSIONS.get(Path(path).suffix.lower())
    if fmt is None:
        raise UserError(
            f"--report {path!r}: cannot tell the format from the extension; use one of "
            f"{', '.join(REPORT_EXTENSIONS)} (.json is the dashboard report, .xml JUnit)"
        )
    return fmt


def _write_outputs(doc: EvalDocument, out: str | None, reports: tuple[str, ...]) -> None:
    from evalstream.assertions.evalruns.reports import dump_document, render_eval_report

    if out:
        Path(out).write_bytes(dump_document(doc))
    for path in reports:
        Path(path).write_text(render_eval_report(doc, _report_format(path)), encoding="utf-8")


def _exit(code: int, results: list[DatasetResult]) -> None:
    """Exit; when a synchronous target thread ignored its cancellation (the sample's notes say
    so), exit without waiting for it: the results are already written."""
    stuck = any(
        "keeps running" in n for r in results for c in r.cases for s in c.samples for n in s.notes
    )
    if stuck:
        click.echo("warning: a target thread is still running; exiting without it", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _run_interruptibly(make: Callable[[], Awaitable[T]], interrupt: Callable[[], None]) -> T:
    """Run a coroutine; the first Ctrl-C calls `interrupt` (the run then finishes early and
    returns what it has) instead of killing the process."""
    import asyncio
    import signal

    async def main() -> T:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, interrupt)
        try:
            return await make()
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    return asyncio.run(main())


def _progress(enabled: bool) -> RichProgress | None:
    from evalstream.stream.evalruns.progress import RichProgress

    return RichProgress() if enabled else None


def _prepare(
    dataset: str, reports: tuple[str, ...], no_signals: bool, run: dict[str, Any]
) -> tuple[Suite, RunSettings]:
    """What `eval` and `matrix` check before running: the dataset, the report paths' formats
    and the run settings (the common run options in `run`)."""
    suite = _load_suite(dataset)
    for path in reports:
        _report_format(path)
    settings = _settings(
        tags=tuple(run.pop("tags")),
        case_ids=tuple(run.pop("case_ids")),
        keep_signals=not no_signals,
        **run,
    )
    return suite, settings


def _settings(**kwargs: Any) -> RunSettings:
    from evalstream.stream.evalruns.runner import RunSettings

    try:
        return RunSettings(**kwargs)
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def _summary_line(r: DatasetResult) -> str:
    from evalstream.assertions.evalruns.summaries import pct

    a = r.aggregate_metrics
    return (
        f"{r.name}: {r.passed_cases}/{r.evaluated_cases} cases passed (pass rate "
        f"{pct(r.pass_rate)}), {r.failed_cases} failed, {r.error_cases} errors, "
        f"{r.skipped_cases} skipped; p50 {a.p50_latency_ms or 0:.1f} ms, "
        f"cost ${a.total_cost:.6f}"
    )


def _profile_lines(check: ProfileCheck) -> list[str]:
    lines = [f"threshold profile {check.profile}:"]
    for row in check.rows:
        value = "undefined" if row.value is None else f"{row.value:.3f}"
        note = f" ({row.note})" if row.note else ""
        lines.append(f"  {row.metric}: {value} vs {row.threshold:g} -> {row.status}{note}")
    return lines


def _load_run(path: str) -> DatasetResult:
    """A dataset run from a file; `MATRIX.json#variant` picks one variant of a matrix run."""
    from evalstream.assertions.evalruns.compare import Comparison
    from evalstream.assertions.evalruns.matrix import MatrixResult
    from evalstream.assertions.evalruns.reports import read_eval_document
    from evalstream.assertions.file_kinds import FileKind
    from evalstream.connectors.files.file_kinds import expecting

    file, _, variant = path.partition("#")
    try:
        with expecting(file, FileKind.EVAL_RUN):
            doc = read_eval_document(Path(file).read_bytes(), file)
    except OSError as exc:
        raise UserError(f"cannot read {file}: {exc.strerror or exc}") from exc
    except InputError as exc:
        raise UserError(str(exc)) from exc
    if isinstance(doc, MatrixResult):
        ids = [v.variant_id for v in doc.variants]
        found = next((v.result for v in doc.variants if v.variant_id == variant), None)
        if found is None:
            raise UserError(
                f"{file} is a matrix run; name a variant as {file}#VARIANT "
                f"(variants: {', '.join(ids)})"
            )
        return found
    if isinstance(doc, Comparison):
        raise UserError(f"{file} is a comparison; compare takes two dataset runs")
    return doc


common_run_options = [
    click.option(
        "--repeat",
        "-n",
        type=int,
        default=1,
        show_default=True,
        help="Samples per case (for pass@k / pass^k).",
    ),
    click.option(
        "--k",
        "k",
        type=int,
        default=3,
        show_default=True,
        help="k of pass@k and pass^k (undefined when --repeat < k).",
    ),
    click.option(
        "--concurrency", "-j", type=int, default=4, show_default=True, help="Samples run at once."
    ),
    click.option(
        "--timeout",
        "default_timeout_ms",
        type=float,
        default=None,
        help="Default per-case timeout in ms (a case's own `timeout` wins; then the "
        "dataset's defaultTimeout; then 60000).",
    ),
    click.option(
        "--retries",
        type=int,
        default=0,
        show_default=True,
        help="Retries of a sample whose target errored (never of a failure).",
    ),
    click.option(
        "--retry-backoff",
        "retry_backoff_s",
        type=float,
        default=0.5,
        show_default=True,
        help="First retry delay in seconds (doubles).",
    ),
    click.option("--tag", "tags", multiple=True, help="Run cases with this tag (repeatable)."),
    click.option("--case", "case_ids", multiple=True, help="Run this case id (repeatable)."),
    click.option("--fail-fast", is_flag=True, help="Stop at the first sample that does not pass."),
    click.option("--judge", "judge_spec", help=JUDGE_HELP),
    *judge_batch_options,
    pricing_option,
    click.option("--no-progress", is_flag=True, help="No progress bar."),
    click.option("--no-signals", is_flag=True, help="Do not keep raw signals in the result."),
    click.option(
        "--report",
        "reports",
        multiple=True,
        help="Write a report; the format follows the extension: .md, .json "
        "(dashboard), .xml (JUnit), .html (repeatable).",
    ),
]


def register(group: click.Group) -> None:
    group.add_command(eval_command)
    group.add_command(matrix_command)
    group.add_command(compare_command)
    group.add_command(eval_report_command)


@click.command("eval")
@click.argument("dataset", type=click.Path(dir_okay=False))
@click.option(
    "--target",
    "-t",
    required=True,
    help="module:function | path/file.py:function | http(s)://URL | cmd:COMMAND",
)
@with_options(common_run_options)
@click.option(
    "--config",
    "config_pairs",
    multiple=True,
    help="KEY=VALUE handed to the target (recorder.config; repeatable).",
)
@click.option("--variant-id", help="Label this run as a variant (for comparisons).")
@click.option(
    "--sandbox",
    is_flag=True,
    help="Run a cmd: target inside the bubblewrap sandbox: read-only view of what it needs "
    "to start, none of this user's other files, processes, environment or network.",
)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Save the run as JSON here.")
@click.option(
    "--profile",
    type=click.Choice(PROFILE_NAMES),
    help="Gate on the eval-harness thresholds instead of 'every case passed'.",
)
@click.option(
    "--pass-hat",
    type=click.Choice(["simple", "unbiased"]),
    default="simple",
    show_default=True,
    help="Which pass^k the profile checks.",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False),
    help="A saved run to compare with; the gate fails when the comparison blocks.",
)
@click.option(
    "--fail-on",
    type=click.Choice(["critical", "warning"]),
    default="critical",
    show_default=True,
    help="With --baseline: which regressions block.",
)
@click.option("--allow-removed", is_flag=True, help=ALLOW_REMOVED_HELP)
def eval_command(
    dataset: str,
    target: str,
    config_pairs: tuple[str, ...],
    variant_id: str | None,
    sandbox: bool,
    out: str | None,
    profile: str | None,
    pass_hat: PassHat,
    baseline: str | None,
    fail_on: FailOn,
    allow_removed: bool,
    judge_spec: str | None,
    judge_batch: bool,
    judge_batch_state: str | None,
    pricing: str | None,
    no_progress: bool,
    no_signals: bool,
    reports: tuple[str, ...],
    **run: Any,
) -> None:
    """Run DATASET's cases against a target and evaluate them (the signal-native spec
    runDataset)."""
    from evalstream.assertions.evalruns.compare import CompareOptions
    from evalstream.assertions.evalruns.profiles import PROFILES, check_profile
    from evalstream.connectors.targets.spec import parse_target
    from evalstream.stream.evalruns.runner import DatasetRunner

    suite, settings = _prepare(dataset, reports, no_signals, run)
    base = _load_run(baseline) if baseline else None
    costs = _pricing(pricing)
    try:
        runner = DatasetRunner(
            suite,
            parse_target(target, sandbox=sandbox),
            settings,
            judge=_judge(judge_spec, costs, judge_batch, judge_batch_state),
            pricing=costs,
            variant_id=variant_id,
            config=_config(config_pairs),
        )
    except InputError as exc:
        raise UserError(str(exc)) from exc
    result = _run_with_progress(runner, not no_progress)
    _write_outputs(result, out, reports)
    click.echo(_summary_line(result))
    _echo_judge_usage(runner.judge)
    if result.pass_metrics.undefined_reason:
        click.echo(f"note: {result.pass_metrics.undefined_reason}")
    if result.interrupted:
        click.echo("interrupted: the finished cases were kept", err=True)
        _exit(EXIT_INTERRUPTED, [result])
    ok = result.failed_cases == 0 and result.error_cases == 0
    check = None
    if profile is not None:
        check = check_profile(result, PROFILES[profile], pass_hat=pass_hat)
        click.echo("\n".join(_profile_lines(check)))
        ok = check.passed
    if base is not None:
        options = CompareOptions(fail_on=fail_on, allow_removed=allow_removed)
        comparison = _compare(base, result, options, check)
        click.echo(
            f"compared with {baseline}: {comparison.summary.verdict}"
            + (
                f"; BLOCKS: {comparison.summary.block_reason}"
                if comparison.summary.should_block
                else "; does not block"
            )
        )
        ok = (
            ok and not comparison.summary.should_block
            if profile
            else not comparison.summary.should_block
        )
    _exit(0 if ok else 1, [result])


def _run_with_progress(runner: DatasetRunner | MatrixRunner, show: bool) -> Any:
    bar = _progress(show)

    def go() -> Any:
        if bar is not None:
            runner.progress = bar
        return _run_interruptibly(runner.run, runner.interrupt)

    try:
        if bar is None:
            return go()
        with bar:
            return go()
    except InputError as exc:
        raise UserError(str(exc)) from exc


@click.command("matrix")
@click.argument("dataset", type=click.Path(dir_okay=False))
@click.option(
    "--variants",
    "variants_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="variants.yaml: the variants (targets and config), optional baseline.",
)
@with_options(common_run_options)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Save the matrix as JSON.")
@click.option(
    "--fail-on",
    type=click.Choice(["never", "critical", "warning"]),
    default="never",
    show_default=True,
    help="Exit 1 when a variant's comparison with the baseline blocks at this level.",
)
@click.option("--allow-removed", is_flag=True, help=ALLOW_REMOVED_HELP)
@click.option(
    "--sandbox",
    is_flag=True,
    help="Run the variants' cmd: targets inside the bubblewrap sandbox (see eval --sandbox); "
    "a variant of another kind is refused.",
)
def matrix_command(
    dataset: str,
    variants_path: str,
    out: str | None,
    fail_on: str,
    allow_removed: bool,
    sandbox: bool,
    judge_spec: str | None,
    judge_batch: bool,
    judge_batch_state: str | None,
    pricing: str | None,
    no_progress: bool,
    no_signals: bool,
    reports: tuple[str, ...],
    **run: Any,
) -> None:
    """Run DATASET once per variant; rank them and recommend one (the signal-native spec
    runMatrix)."""
    from evalstream.assertions.evalruns.compare import CompareOptions
    from evalstream.assertions.evalruns.matrix import MatrixResult
    from evalstream.assertions.evalruns.variants import load_variants
    from evalstream.stream.evalruns.matrix import MatrixRunner

    suite, settings = _prepare(dataset, reports, no_signals, run)
    costs = _pricing(pricing)
    try:
        variants = load_variants(variants_path)
        runner = MatrixRunner(
            suite,
            variants,
            settings,
            judge=_judge(judge_spec, costs, judge_batch, judge_batch_state),
            pricing=costs,
            compare_options=CompareOptions(
                fail_on="warning" if fail_on == "warning" else "critical",
                allow_removed=allow_removed,
            ),
            sandbox=sandbox,
        )
    except InputError as exc:
        raise UserError(str(exc)) from exc
    result: MatrixResult = _run_with_progress(runner, not no_progress)
    _write_outputs(result, out, reports)
    for v in result.variants:
        click.echo(f"[{v.variant_id}] {_summary_line(v.result)}")
    _echo_judge_usage(runner.judge)
    click.echo(
        f"Pareto frontier: {', '.join(result.comparison.pareto_frontier)}; by pass rate: "
        f"{' > '.join(result.comparison.by_pass_rate)}"
    )
    if result.recommendation:
        rec = result.recommendation
        click.echo(f"recommendation: {rec.variant_id} (confidence {rec.confidence}): {rec.reason}")
    blocked = []
    for vid, c in result.comparisons.items():
        s = c.summary
        click.echo(
            f"{vid} vs {result.baseline_variant}: {s.verdict}"
            + (f"; BLOCKS: {s.block_reason}" if s.should_block else "; does not block")
        )
        if s.should_block:
            blocked.append(vid)
    if result.interrupted:
        click.echo("interrupted: the finished variants and cases were kept", err=True)
        _exit(EXIT_INTERRUPTED, [v.result for v in result.variants])
    _exit(1 if blocked and fail_on != "never" else 0, [v.result for v in result.variants])


@click.command("compare")
@click.argument("baseline")
@click.argument("candidate")
@click.option(
    "--fail-on",
    type=click.Choice(["critical", "warning"]),
    default="critical",
    show_default=True,
    help="Which regressions block (exit 1).",
)
@click.option(
    "--profile",
    type=click.Choice(PROFILE_NAMES),
    help="Also require the candidate to meet this threshold profile.",
)
@click.option(
    "--pass-hat", type=click.Choice(["simple", "unbiased"]), default="simple", show_default=True
)
@click.option("--pass-rate-threshold", type=float, default=0.05, show_default=True)
@click.option(
    "--latency-threshold",
    type=float,
    default=0.10,
    show_default=True,
    help="Relative latency rise that counts (0.10 = 10 %).",
)
@click.option("--cost-threshold", type=float, default=0.10, show_default=True)
@click.option(
    "--min-latency-delta-ms",
    type=float,
    default=50.0,
    show_default=True,
    help="Ignore latency changes smaller than this (jitter).",
)
@click.option("--confidence", type=float, default=0.95, show_default=True)
@click.option("--allow-removed", is_flag=True, help=ALLOW_REMOVED_HELP)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Save the comparison (JSON).")
@click.option(
    "--report",
    "reports",
    multiple=True,
    help="Write a report (.md, .json, .xml, .html; repeatable).",
)
@click.option(
    "--format",
    "-f",
    "fmt",
    type=click.Choice(["md", "json"]),
    default="md",
    show_default=True,
    help="What to print on stdout.",
)
def compare_command(
    baseline: str,
    candidate: str,
    fail_on: FailOn,
    profile: str | None,
    pass_hat: PassHat,
    pass_rate_threshold: float,
    latency_threshold: float,
    cost_threshold: float,
    min_latency_delta_ms: float,
    confidence: float,
    allow_removed: bool,
    out: str | None,
    reports: tuple[str, ...],
    fmt: str,
) -> None:
    """Compare two saved runs (BASE.json CAND.json; MATRIX.json#variant picks a variant).

    Exit 1 when the candidate should not be merged: a critical regression (pass -> fail with
    statistical support when repeated), a significant pass-rate drop, a failed --profile,
    baseline cases the candidate did not evaluate (unless --allow-removed), or with --fail-on
    warning also metric degradations. Exit 2 when the runs are of different datasets."""
    from evalstream.assertions.evalruns.compare import CompareOptions
    from evalstream.assertions.evalruns.profiles import check_profile
    from evalstream.assertions.evalruns.reports import render_eval_report

    for path in reports:
        _report_format(path)
    if not 0.0 < confidence < 1.0:
        raise UserError(f"--confidence must be within (0, 1), got {confidence}")
    base, cand = _load_run(baseline), _load_run(candidate)
    options = CompareOptions(
        pass_rate_threshold=pass_rate_threshold,
        latency_threshold=latency_threshold,
        cost_threshold=cost_threshold,
        min_latency_delta_ms=min_latency_delta_ms,
        confidence=confidence,
        fail_on=fail_on,
        allow_removed=allow_removed,
    )
    check = check_profile(cand, profile_by_name(profile), pass_hat=pass_hat) if profile else None
    comparison = _compare(base, cand, options, check)
    _write_outputs(comparison, out, reports)
    sys.stdout.write(render_eval_report(comparison, fmt))
    if comparison.summary.should_block:
        click.echo(f"BLOCKED: {comparison.summary.block_reason}", err=True)
        sys.exit(1)
    sys.exit(0)


def _compare(
    base: DatasetResult, cand: DatasetResult, options: CompareOptions, check: ProfileCheck | None
) -> Comparison:
    from evalstream.assertions.evalruns.compare import DatasetMismatchError, compare

    try:
        return compare(base, cand, options, profile_check=check)
    except DatasetMismatchError as exc:
        raise UserError(str(exc)) from exc


def profile_by_name(name: str) -> ThresholdProfile:
    from evalstream.assertions.evalruns.profiles import profile

    try:
        return profile(name)
    except InputError as exc:
        raise UserError(str(exc)) from exc


@click.command("eval-report")
@click.argument("document", type=click.Path(dir_okay=False))
@click.option(
    "--format", "-f", "fmt", type=click.Choice(REPORT_FORMATS), default="md", show_default=True
)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write here, not stdout.")
def eval_report_command(document: str, fmt: str, out: str | None) -> None:
    """Render a saved dataset run, matrix run or comparison as md, json, junit or html."""
    from evalstream.assertions.evalruns.reports import read_eval_document, render_eval_report
    from evalstream.assertions.file_kinds import FileKind
    from evalstream.connectors.files.file_kinds import expecting

    try:
        with expecting(document, FileKind.EVAL_RUN):
            doc = read_eval_document(Path(document).read_bytes(), document)
    except OSError as exc:
        raise UserError(f"cannot read {document}: {exc.strerror or exc}") from exc
    except InputError as exc:
        raise UserError(str(exc)) from exc
    text = render_eval_report(doc, fmt)
    if out:
        Path(out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
