"""The `evalstream` command line.

Exit codes: 0 success (every episode passed), 1 an episode failed or errored, 2 a usage or
input error (printed as one message, no traceback), or input that evaluated nothing (unless
--allow-empty).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from evalstream.assertions.errors import InputError
from evalstream.stream.commands import register_all
from evalstream.stream.commands.evaluation_options import (
    evaluation_options,
    judge_batch_options,
    with_options,
)
from evalstream.stream.commands.otlp_options import (
    ENDPOINT_HELP,
    MODE_HELP,
    OTLP_MODES,
    otlp_options,
)
from evalstream.stream.commands.user_error import UserError

# Each command imports what it runs inside its handler: `--help` and the light commands start
# without the engine, Kafka, the judge's client or Prometheus (tests/cli/test_startup.py).
if TYPE_CHECKING:
    from evalstream.assertions.evaluation.assembly import CloseRules
    from evalstream.assertions.judge.protocol import Judge
    from evalstream.assertions.suite_format.suites import Suite
    from evalstream.assertions.wire.pricing import PricingTable
    from evalstream.connectors.otel_export.otlp_export import ExportStats
    from evalstream.stream.settings import WorkerSettings
    from evalstream.stream.telemetry.metrics import PipelineMetrics

FORMATS = ("table", "json", "markdown", "junit")
ALLOW_EMPTY_HELP = "Exit 0 even when no episode was evaluated (else exit 2: a likely typo)."


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="evalstream")
def cli() -> None:
    """Continuous evaluation of AI agents from the signals they emit."""
    from evalstream.stream.console.load_warnings import show_warnings_plainly

    show_warnings_plainly()


@dataclass(frozen=True)
class Loaded:
    suites: list[Suite]
    pricing: PricingTable
    rules: CloseRules
    judge_spec: str | None = None

    def judge(
        self,
        metrics: PipelineMetrics | None = None,
        *,
        batchable: bool = False,
        batch: bool = False,
        batch_state: str | None = None,
    ) -> Judge | None:
        """The judge of `llm.judge` (evalstream.stream.judge.judge_from); a bad --judge is a
        UserError."""
        from evalstream.stream.judge import judge_from

        try:
            return judge_from(
                self.judge_spec,
                metrics,
                pricing=self.pricing,
                batchable=batchable,
                batch=batch,
                batch_state=batch_state,
            )
        except InputError as exc:
            raise UserError(str(exc)) from exc


def suite_file(path: str) -> Suite:
    """A suite; a file of another kind (signals, a store export...) says which command reads
    it instead of listing the suite fields it lacks."""
    from evalstream.assertions.file_kinds import FileKind
    from evalstream.assertions.suite_format.suites import load_suite
    from evalstream.connectors.files.file_kinds import expecting

    with expecting(path, FileKind.SUITE):
        return load_suite(path)


def _refuse_other_kinds(sources: tuple[str, ...]) -> None:
    """Before `up` starts: a source file whose first line is no signal and that looks like
    another kind of file (a store export, a suite...) is the user's error naming the command
    that reads it, not one rejection per line of a live run. Pipes and files still empty
    (followed as they grow) are left to the run."""
    from evalstream.connectors.codecs.jsonl import read_signals
    from evalstream.connectors.files.file_kinds import refuse_other_kind_of_signals

    for path in sources:
        if path == "-" or not Path(path).is_file():
            continue
        try:
            refuse_other_kind_of_signals(path, next(read_signals(path), None))
        except InputError as exc:  # WrongFileKindError included
            raise UserError(str(exc)) from exc


def load_common(
    suites: tuple[str, ...],
    pricing: str | None,
    end_signals: tuple[str, ...],
    grace_ms: float,
    inactivity_ms: float,
    reorder_ms: float,
    judge_spec: str | None = None,
) -> Loaded:
    from evalstream.assertions.evaluation.assembly import CloseRules
    from evalstream.assertions.wire.pricing import default_pricing, load_pricing

    try:
        return Loaded(
            suites=[suite_file(path) for path in suites],
            pricing=load_pricing(Path(pricing)) if pricing else default_pricing(),
            rules=CloseRules(
                end_patterns=end_signals or ("harness:end",),
                grace_ms=grace_ms,
                inactivity_ms=inactivity_ms,
                reorder_ms=reorder_ms,
            ),
            judge_spec=judge_spec,
        )
    except (InputError, ValueError) as exc:
        raise UserError(str(exc)) from exc


@cli.command()
@evaluation_options()
@click.argument("recordings", nargs=-1, required=True)
@click.option(
    "--format", "-f", "fmt", type=click.Choice(FORMATS), default="table", show_default=True
)
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the report here instead of stdout.",
)
@click.option(
    "--episode-id", help="Episode id for signals that carry none (signal-native recordings)."
)
@click.option("--allow-empty", is_flag=True, help=ALLOW_EMPTY_HELP)
@with_options(judge_batch_options)
@otlp_options
def check(
    suites: tuple[str, ...],
    recordings: tuple[str, ...],
    fmt: str,
    out: str | None,
    episode_id: str | None,
    allow_empty: bool,
    judge_batch: bool,
    judge_batch_state: str | None,
    otlp_endpoint: str | None,
    otlp_mode: str | None,
    **common: Any,
) -> None:
    """Evaluate recorded signals (JSONL files, `-` for stdin) against suites."""
    from evalstream.assertions.reports.check_report import (
        render_json,
        render_junit,
        render_markdown,
    )
    from evalstream.stream.console.check_table import print_table
    from evalstream.stream.console.consoles import output_console
    from evalstream.stream.offline import check_files

    loaded = load_common(suites, **common)
    export = None
    if otlp_endpoint or otlp_mode:  # the exporter (httpx, metrics) only when asked for
        from evalstream.stream.evaluation_export import EvaluationExport, cli_export_settings

        otlp = cli_export_settings(otlp_endpoint, otlp_mode)
        export = EvaluationExport(otlp) if otlp is not None else None
    try:
        report = check_files(
            list(recordings),
            loaded.suites,
            rules=loaded.rules,
            pricing=loaded.pricing,
            judge=loaded.judge(batchable=True, batch=judge_batch, batch_state=judge_batch_state),
            episode_id=episode_id,
            on_record=export.offer_episode if export is not None else None,
        )
    except InputError as exc:
        raise UserError(str(exc)) from exc
    finally:
        if export is not None:
            _report_export(export.close())
    if fmt == "table" and out is None:
        print_table(report, output_console())
    elif fmt == "table":
        with open(out or "", "w", encoding="utf-8") as handle:
            print_table(report, output_console(file=handle, no_color=True))
    else:
        text = {"json": render_json, "markdown": render_markdown, "junit": render_junit}[fmt](
            report
        )
        if out is None:
            sys.stdout.write(text)
        else:
            Path(out).write_text(text, encoding="utf-8")
    for case_id in report.unknown_cases:
        click.echo(f"warning: case_id {case_id!r} matches no case of the given suites", err=True)
    if (empty := report.nothing_evaluated()) and not allow_empty:
        click.echo(f"error: {empty}", err=True)
    sys.exit(report.exit_code(allow_empty=allow_empty))


@cli.command()
@evaluation_options()
@click.argument("sources", nargs=-1)
@click.option("--follow", is_flag=True, help="Keep reading files as they grow (like tail -f).")
@click.option(
    "--metrics-port",
    type=int,
    default=9464,
    show_default=True,
    help="Serve /metrics here; 0 turns it off.",
)
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@click.option(
    "--kafka",
    metavar="HOST:PORT",
    help="Run the Kafka worker against this broker instead of the embedded runtime; "
    "SOURCES, if any, are first published to the signals topic.",
)
@click.option(
    "--topic-prefix",
    default="evalstream.",
    show_default=True,
    help="Topic name prefix (with --kafka).",
)
@click.option(
    "--scoring",
    type=click.Path(exists=True, dir_okay=False),
    help="Scoring settings YAML: score closed episodes against baselines, raise alerts.",
)
@click.option(
    "--gateway-port",
    type=int,
    default=0,
    help="Also serve the HTTP gateway here, feeding this runtime (0 = off; "
    "EVALSTREAM_GATEWAY_* settings apply, no token needed unless tokens are configured).",
)
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Also write the episode and verdict records (the worker's topics) as JSON lines "
    "here; `-` is stdout, and the console output then goes to stderr.",
)
@otlp_options
def up(
    suites: tuple[str, ...],
    sources: tuple[str, ...],
    follow: bool,
    metrics_port: int,
    metrics_host: str,
    kafka: str | None,
    topic_prefix: str,
    scoring: str | None,
    gateway_port: int,
    out: str | None,
    otlp_endpoint: str | None,
    otlp_mode: str | None,
    **common: Any,
) -> None:
    """Run the embedded runtime (no Kafka): evaluate signals from files or stdin, live.

    SOURCES are JSONL files, or `-` for standard input (the default without --gateway-port).
    With --kafka, run the worker on that broker instead (same stages, same results).
    """
    import asyncio

    from evalstream.assertions.evaluation.results import Summary
    from evalstream.assertions.scores.stage import load_scoring_settings
    from evalstream.stream.commands.gateway import embedded_gateway_settings
    from evalstream.stream.console.consoles import output_console
    from evalstream.stream.embedded import run_embedded, serve_metrics
    from evalstream.stream.telemetry.metrics import PipelineMetrics

    loaded = load_common(suites, **common)
    _refuse_other_kinds(sources)
    try:
        scoring_settings = load_scoring_settings(scoring) if scoring else None
    except InputError as exc:
        raise UserError(str(exc)) from exc
    from evalstream.stream.evaluation_export import cli_export_settings

    otlp = cli_export_settings(otlp_endpoint, otlp_mode)
    if kafka:
        if out is not None:
            raise UserError(
                "--out writes the embedded runtime's records; with --kafka the worker "
                "publishes them to its topics: copy those with `evalstream record`"
            )
        up_on_kafka(
            kafka,
            topic_prefix,
            suites,
            sources,
            loaded,
            metrics_port,
            metrics_host,
            scoring,
            otlp=(otlp_endpoint, otlp_mode) if otlp is not None else None,
        )
        return
    gateway = embedded_gateway_settings(gateway_port) if gateway_port else None
    metrics = PipelineMetrics()
    if metrics_port:
        try:
            serve_metrics(metrics, metrics_port, metrics_host)
        except OSError as exc:
            raise UserError(
                f"cannot serve /metrics on {metrics_host}:{metrics_port}: {exc}; "
                "pass --metrics-port 0 or another port"
            ) from exc
    console = output_console(stderr=out == "-")  # `--out -`: stdout holds only records
    try:
        run = asyncio.run(
            run_embedded(
                list(sources) or ([] if gateway else ["-"]),
                loaded.suites,
                rules=loaded.rules,
                pricing=loaded.pricing,
                follow=follow,
                metrics=metrics,
                console=console,
                judge=loaded.judge(metrics),
                scoring=scoring_settings,
                gateway=gateway,
                stop_on_signals=True,
                out=out,
                otlp=otlp,
            )
        )
    except InputError as exc:
        raise UserError(str(exc)) from exc
    except KeyboardInterrupt:  # a second Ctrl-C while closing the open episodes
        sys.exit(130)
    s = Summary.of(run.results)
    console.print(
        f"{s.passed} passed, {s.failed} failed, {s.errors} errors, {s.unevaluated} unevaluated "
        f"of {s.episodes} episodes; {run.verdicts} verdicts; {len(run.dead_letters)} dead letters"
    )
    if scoring_settings is not None:
        console.print(
            f"{len(run.alerts)} alerts; {len(run.failed_by_alerts)} episodes passed their "
            "assertions but fail on a CRITICAL alert"
        )
    sys.exit(128 + run.stopped_by if run.stopped_by is not None else run.exit_code())


def up_on_kafka(
    broker: str,
    topic_prefix: str,
    suite_paths: tuple[str, ...],
    sources: tuple[str, ...],
    loaded: Loaded,
    metrics_port: int,
    metrics_host: str,
    scoring: str | None,
    otlp: tuple[str | None, str | None] | None = None,
) -> None:
    """`up --kafka`: publish the given files to the signals topic, then run the worker."""
    import asyncio

    from aiokafka.errors import KafkaError

    if loaded.judge_spec is not None:
        raise UserError("--judge does not reach the Kafka worker: it uses ANTHROPIC_API_KEY")
    rules = loaded.rules
    settings = settings_from(
        None,
        broker=broker,
        topic_prefix=topic_prefix,
        suites=list(suite_paths),
        end_patterns=list(rules.end_patterns),
        grace_ms=rules.grace_ms,
        inactivity_ms=rules.inactivity_ms,
        reorder_ms=rules.reorder_ms,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        scoring=scoring,
        otlp_endpoint=otlp[0] if otlp else None,
        otlp_mode=otlp[1] if otlp else None,
    )
    files = [source for source in sources if source != "-"]
    if len(files) != len(sources):
        raise UserError("--kafka reads files, not stdin: publish stdin with kcat or the gateway")
    if files:
        from evalstream.connectors.kafka.publish import publish_jsonl_files

        try:
            count = asyncio.run(
                publish_jsonl_files(
                    settings.broker,
                    settings.topic("signals"),
                    [Path(f) for f in files],
                    partitions=settings.partitions,
                    replication_factor=settings.replication_factor,
                )
            )
        except InputError as exc:
            raise UserError(str(exc)) from exc
        except KafkaError as exc:
            raise UserError(f"cannot reach Kafka at {settings.broker}: {exc}") from exc
        click.echo(f"published {count} signals to {settings.topic('signals')}", err=True)
    from evalstream.stream.kafka_worker.app import run_worker  # imports faust: only with --kafka

    try:
        run_worker(settings, loaded.suites, pricing=loaded.pricing)
    except InputError as exc:
        raise UserError(str(exc)) from exc


def _report_export(stats: ExportStats) -> None:
    """What did not reach the OTLP endpoint, on stderr (the report itself is unchanged)."""
    if stats.dropped or stats.failed:
        click.echo(
            f"warning: OTLP export: {stats.sent} evaluation events sent, {stats.failed} "
            f"failed, {stats.dropped} dropped (see the log above)",
            err=True,
        )


@cli.command()
@click.option("--out", "-o", type=click.Path(dir_okay=False, writable=True))
def schema(out: str | None) -> None:
    """Print the JSON Schema of the suite format (for editors)."""
    from evalstream.assertions.suite_format.schema import suite_json_schema

    text = json.dumps(suite_json_schema(), indent=2) + "\n"
    if out:
        Path(out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


def worker_options(func: Callable[..., None]) -> Callable[..., None]:
    """Options of commands that talk to Kafka; each overrides EVALSTREAM_* and --config."""
    options = [
        click.option(
            "--config",
            "config_file",
            type=click.Path(exists=True, dir_okay=False),
            help="Worker settings YAML.",
        ),
        click.option("--broker", help="Kafka bootstrap servers (EVALSTREAM_BROKER)."),
        click.option("--topic-prefix", help="Topic name prefix (EVALSTREAM_TOPIC_PREFIX)."),
        click.option(
            "--partitions", type=int, help="Partitions per topic (EVALSTREAM_PARTITIONS)."
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def settings_from(config_file: str | None, **overrides: Any) -> WorkerSettings:
    from evalstream.stream.settings import load_settings

    try:
        return load_settings(config_file, os.environ, overrides)
    except InputError as exc:
        raise UserError(str(exc)) from exc


@cli.command()
@worker_options
def topics(config_file: str | None, **overrides: Any) -> None:
    """Create evalstream's topics with the configured partition count (idempotent)."""
    import asyncio

    from aiokafka.errors import KafkaError

    from evalstream.connectors.kafka.topics import ensure_topics
    from evalstream.stream.settings import COMPACTED_TOPICS, LOG_APPEND_TIME_TOPICS, TOPIC_NAMES

    settings = settings_from(config_file, **overrides)
    names = [settings.topic(n) for n in TOPIC_NAMES]
    try:
        counts = asyncio.run(
            ensure_topics(
                settings.broker,
                names,
                settings.partitions,
                settings.replication_factor,
                compacted=[settings.topic(n) for n in COMPACTED_TOPICS],
                log_append_time=[settings.topic(n) for n in LOG_APPEND_TIME_TOPICS],
            )
        )
    except InputError as exc:
        raise UserError(str(exc)) from exc
    except KafkaError as exc:
        raise UserError(f"cannot reach Kafka at {settings.broker}: {exc}") from exc
    for name in names:
        click.echo(f"{name}: {counts[name]} partitions")


@cli.command()
@worker_options
@click.option(
    "--suite",
    "-s",
    "suites",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Suite YAML file (repeatable; EVALSTREAM_SUITES).",
)
@click.option(
    "--metrics-port", type=int, help="Serve /metrics here (EVALSTREAM_METRICS_PORT; 0 = off)."
)
@click.option(
    "--scoring",
    type=click.Path(exists=True, dir_okay=False),
    help="Scoring settings YAML (EVALSTREAM_SCORING).",
)
@click.option("--otlp-endpoint", metavar="URL", help=ENDPOINT_HELP + " (EVALSTREAM_OTLP_ENDPOINT)")
@click.option(
    "--otlp-mode", type=click.Choice(OTLP_MODES), help=MODE_HELP + " (EVALSTREAM_OTLP_MODE)"
)
@click.option("--loglevel", default="WARNING", show_default=True)
def worker(
    config_file: str | None, suites: tuple[str, ...], loglevel: str, **overrides: Any
) -> None:
    """Run the Kafka worker: evaluate the signals topic, publish verdicts and episodes."""
    from evalstream.assertions.scores.stage import load_scoring_settings
    from evalstream.assertions.wire.pricing import load_pricing
    from evalstream.stream.evaluation_export import export_settings

    settings = settings_from(config_file, suites=list(suites) or None, **overrides)
    if not settings.suites:
        raise UserError("no suites: pass --suite FILE or set EVALSTREAM_SUITES")
    try:
        loaded = [suite_file(path) for path in settings.suites]
        pricing = load_pricing(Path(settings.pricing)) if settings.pricing else None
        load_scoring_settings(settings.scoring) if settings.scoring else None
        export_settings(settings.otlp_endpoint, settings.otlp_mode, os.environ)
    except InputError as exc:
        raise UserError(str(exc)) from exc
    from evalstream.stream.kafka_worker.app import (
        run_worker,  # imports faust: only for this command
    )

    try:
        run_worker(settings, loaded, pricing=pricing, loglevel=loglevel)
    except InputError as exc:
        raise UserError(str(exc)) from exc


@cli.command("dev-kafka")
@click.option(
    "--port", type=int, default=None, help="Broker port on 127.0.0.1 (default: a free one)."
)
def dev_kafka(port: int | None) -> None:
    """Run a real single-node Kafka broker (assembled from Maven Central) until Ctrl-C."""
    from evalstream.stream.dev_kafka import KafkaLauncherError, run_dev_kafka

    try:
        sys.exit(run_dev_kafka(port))
    except KafkaLauncherError as exc:
        raise UserError(str(exc)) from exc


register_all(cli)
# The episode-store workflow's name for `score`: the same command, listed as an alias.
cli.add_command(
    click.Command(
        "run",
        callback=cli.commands["score"].callback,
        params=cli.commands["score"].params,
        help=f"Alias of `score`. {cli.commands['score'].help}",
        short_help="Alias of `score`: score episodes against a baseline.",
    )
)


def main() -> None:
    cli()
