"""`evalstream record` and `evalstream replay`.

record:  a topic (or a slice: --from-time/--to-time, --offset, --partition, --follow) into a
         JSONL recording (zstd when the file name ends in .zst).
replay:  recordings or a topic slice into `check` (a report), `embedded` (live results and
         /metrics) or a `topic` (a worker evaluates it); `--mode live` re-issues the
         recorded LLM requests to a candidate model and scores it against the recording.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from evalstream.assertions.errors import InputError
from evalstream.stream.commands.evaluation_options import evaluation_options
from evalstream.stream.commands.otlp_options import otlp_options
from evalstream.stream.commands.user_error import UserError

# The handlers import Kafka, the pipeline and the console when they run: `--help` stays light.
if TYPE_CHECKING:
    from evalstream.connectors.files.recording import EpisodeRename
    from evalstream.connectors.kafka.topic_io import TopicSlice
    from evalstream.connectors.otel_export.otlp_export import OtlpExportSettings
    from evalstream.stream.evaluation_export import EvaluationExport
    from evalstream.stream.jsonl_records import JsonlRecords
    from evalstream.stream.recordings.replay import Pacer, PipelineTarget, TopicTarget

INTERRUPTED = 130
FORMATS = ("table", "json", "markdown", "junit")


def slice_options(func: Callable[..., None]) -> Callable[..., None]:
    """Which part of a topic to read; shared by `record` and `replay --from-topic`."""
    options = [
        click.option(
            "--from-time",
            help="First timestamp: RFC 3339, epoch ms, `now`, or a duration ago (2h, 7d).",
        ),
        click.option("--to-time", help="Stop before this timestamp (same forms)."),
        click.option(
            "--offset",
            "offsets",
            multiple=True,
            help="Start offset: OFFSET for every partition or PARTITION:OFFSET (repeatable).",
        ),
        click.option(
            "--partition",
            "partitions",
            type=int,
            multiple=True,
            help="Read only this partition (repeatable; default: all).",
        ),
        click.option("--broker", help="Kafka bootstrap servers (EVALSTREAM_BROKER)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _slice(
    *,
    topic: str,
    from_time: str | None,
    to_time: str | None,
    offsets: tuple[str, ...],
    partitions: tuple[int, ...],
    follow: bool = False,
) -> TopicSlice:
    from evalstream.connectors.kafka.topic_io import TopicSlice
    from evalstream.stream.recordings.record import parse_offsets, parse_time

    if follow and to_time:
        raise UserError("--follow reads until Ctrl-C; it cannot be combined with --to-time")
    try:
        return TopicSlice(
            topic=topic,
            partitions=list(partitions) or None,
            start_offsets=parse_offsets(offsets),
            start_ms=parse_time(from_time) if from_time else None,
            end_ms=parse_time(to_time) if to_time else None,
            follow=follow,
        )
    except InputError as exc:
        raise UserError(str(exc)) from exc


@click.command()
@click.argument("topic")
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    help="Recording file; a name ending in .zst is zstd-compressed.",
)
@slice_options
@click.option("--follow", is_flag=True, help="Keep recording new messages until Ctrl-C.")
@click.option(
    "--compress/--no-compress",
    default=None,
    help="zstd-compress the file (default: when its name ends in .zst).",
)
def record(
    *,
    topic: str,
    out: str,
    from_time: str | None,
    to_time: str | None,
    offsets: tuple[str, ...],
    partitions: tuple[int, ...],
    broker: str | None,
    follow: bool,
    compress: bool | None,
) -> None:
    """Copy TOPIC (or a slice of it) into a recording file, one message per line.

    Without --to-time or --follow it stops at the end offsets seen at start. Ctrl-C stops
    cleanly: the file holds every message read so far and is valid."""
    import asyncio

    from aiokafka.errors import KafkaError
    from rich.console import Console

    from evalstream.stream.commands.broker import broker_address
    from evalstream.stream.recordings.record import record_topic

    bootstrap = broker_address(broker)
    slice_ = _slice(
        topic=topic,
        from_time=from_time,
        to_time=to_time,
        offsets=offsets,
        partitions=partitions,
        follow=follow,
    )
    console = Console(stderr=True)
    try:
        summary = asyncio.run(
            record_topic(bootstrap, slice_, out, compress=compress, console=console)
        )
    except InputError as exc:
        raise UserError(str(exc)) from exc
    except KafkaError as exc:
        raise UserError(f"cannot read {topic!r} from Kafka at {bootstrap}: {exc}") from exc
    planned = "" if summary.planned is None else f" of {summary.planned} planned"
    stopped = (
        " (stopped by signal; the file is complete up to there)" if summary.interrupted else ""
    )
    click.echo(
        f"recorded {summary.written}{planned} messages of {topic} to {out}{stopped}", err=True
    )
    if summary.interrupted and not follow:
        sys.exit(INTERRUPTED)


# The evaluation options of `check`, with suites optional (a topic replay needs none).
_suite_options = evaluation_options(
    suites_required=False,
    suite_help="Suite YAML file (repeatable; needed for --into check/embedded).",
    judge_help="check/embedded: module:factory returning a Judge for llm.judge (default: "
    "the Anthropic judge when ANTHROPIC_API_KEY is set).",
)


@click.command("replay")
@click.argument("recordings", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--from-topic", help="Replay a slice of this topic instead of recordings.")
@slice_options
@click.option(
    "--into",
    type=click.Choice(["check", "embedded", "topic"]),
    default="check",
    show_default=True,
    help="check: a report; embedded: live results and /metrics; topic: produce to --topic.",
)
@click.option("--topic", "to_topic", help="Target topic of --into topic.")
@click.option(
    "--mode",
    type=click.Choice(["dry", "live"]),
    default="dry",
    show_default=True,
    help="dry: re-evaluate the recorded signals; live: re-issue the recorded LLM requests.",
)
@click.option("--episode-prefix", default="", help="Prefix every episode id (key and field).")
@click.option("--episode-suffix", default="", help="Suffix every episode id (key and field).")
@click.option(
    "--speed",
    type=float,
    default=None,
    help="Reproduce the original timing at this factor (2 = twice as fast); "
    "default: as fast as possible.",
)
@click.option(
    "--timestamps",
    type=click.Choice(["original", "now"]),
    default="original",
    show_default=True,
    help="Timestamps of messages produced by --into topic.",
)
@click.option(
    "--keep-partitions",
    is_flag=True,
    help="--into topic: every message keeps its recorded partition (a faithful copy of a "
    "topic not partitioned by key). Default: a keyed message goes where its key decides, "
    "as the worker requires of signals.",
)
@_suite_options
@click.option("--format", "-f", "fmt", type=click.Choice(FORMATS), default="table")
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="check: write the report here. embedded: write the episode and verdict records "
    "(the worker's topics) as JSON lines here; `-` is stdout, the console output then goes "
    "to stderr.",
)
@click.option("--metrics-port", type=int, default=0, help="embedded: serve /metrics here.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@click.option("--base-url", help="live: Messages API base URL of the candidate (or the proxy).")
@click.option("--model", help="live: the candidate model (default: each request's own).")
@click.option(
    "--api-key-env",
    default="ANTHROPIC_API_KEY",
    show_default=True,
    help="live: environment variable holding the API key.",
)
@click.option(
    "--concurrency", type=int, default=4, show_default=True, help="live: episodes at once."
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="check/embedded: exit 0 even when no episode was evaluated (else exit 2).",
)
@otlp_options
def replay_command(
    *,
    recordings: tuple[str, ...],
    from_topic: str | None,
    from_time: str | None,
    to_time: str | None,
    offsets: tuple[str, ...],
    partitions: tuple[int, ...],
    broker: str | None,
    into: str,
    to_topic: str | None,
    mode: str,
    episode_prefix: str,
    episode_suffix: str,
    speed: float | None,
    timestamps: str,
    keep_partitions: bool,
    fmt: str,
    out: str | None,
    metrics_port: int,
    metrics_host: str,
    base_url: str | None,
    model: str | None,
    api_key_env: str,
    concurrency: int,
    allow_empty: bool,
    otlp_endpoint: str | None,
    otlp_mode: str | None,
    **evaluation: Any,
) -> None:
    """Replay RECORDINGS (or --from-topic with a slice) with the current suites.

    Episode ids can be rewritten so a replay never merges with live episodes."""
    import asyncio

    from aiokafka.errors import KafkaError

    from evalstream.connectors.files.recording import EpisodeRename
    from evalstream.stream.jsonl_records import STDOUT
    from evalstream.stream.recordings.replay import Pacer

    if bool(recordings) == bool(from_topic):
        raise UserError("give recording files or --from-topic TOPIC (exactly one of them)")
    if speed is not None and speed <= 0:
        raise UserError(f"--speed {speed}: use a factor > 0 (omit it for as fast as possible)")
    rename = EpisodeRename(episode_prefix, episode_suffix)
    topic_slice = None
    if from_topic:
        topic_slice = _slice(
            topic=from_topic,
            from_time=from_time,
            to_time=to_time,
            offsets=offsets,
            partitions=partitions,
        )
    if mode == "live":
        from evalstream.stream.commands.live_replay import run_live  # live mode only

        run_live(
            recordings=recordings,
            topic_slice=topic_slice,
            broker=broker,
            rename=rename,
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            concurrency=concurrency,
            fmt=fmt,
            out=out,
            evaluation=evaluation,
        )
        return
    records: JsonlRecords | None = None  # embedded with --out: the records written as JSONL
    otlp = _export_settings(otlp_endpoint, otlp_mode, mode, into)
    export: EvaluationExport | None = None
    if into == "topic":
        if not to_topic:
            raise UserError("--into topic needs --topic NAME (the topic to produce to)")
        target: Any = _topic_target(broker, to_topic, timestamps, keep_partitions)
    else:
        if not evaluation["suites"]:
            raise UserError(f"--into {into} evaluates: pass --suite FILE (repeatable)")
        report_out = None if out == STDOUT else out  # check: `-` is stdout, the default
        records_out, out = (out, None) if into == "embedded" else (None, report_out)
        target, records, export = _pipeline_target(
            into, evaluation, metrics_port, metrics_host, records_out, otlp=otlp
        )
    try:
        summary = asyncio.run(
            _run(
                recordings=recordings,
                topic_slice=topic_slice,
                broker=broker,
                target=target,
                rename=rename,
                pacer=Pacer(speed),
            )
        )
    except InputError as exc:
        raise UserError(str(exc)) from exc
    except KafkaError as exc:
        raise UserError(f"Kafka error: {exc}") from exc
    finally:
        _close_outputs(records, export)
    where = f"topic {to_topic}" if into == "topic" else into
    _finish(summary, target, where, fmt, out, records=records, allow_empty=allow_empty)


def _finish(
    summary: Any,
    target: Any,
    where: str,
    fmt: str,
    out: str | None,
    *,
    records: JsonlRecords | None,
    allow_empty: bool,
) -> None:
    """What was replayed, the report of an evaluating target, and the exit code."""
    from evalstream.stream.recordings.replay import PipelineTarget

    stopped = " (stopped by signal)" if summary.interrupted else ""
    click.echo(f"replayed {summary.sent} messages into {where}{stopped}", err=True)
    if isinstance(target, PipelineTarget):
        _print_report(target, where, fmt, out, to_stderr=records is not None and records.to_stdout)
    if summary.interrupted:
        sys.exit(INTERRUPTED)
    if isinstance(target, PipelineTarget):
        report = target.report()
        if (empty := report.nothing_evaluated()) and not allow_empty:
            click.echo(f"error: {empty}", err=True)
        sys.exit(report.exit_code(allow_empty=allow_empty))


def _export_settings(
    endpoint: str | None, otlp_mode: str | None, mode: str, into: str
) -> OtlpExportSettings | None:
    from evalstream.stream.evaluation_export import cli_export_settings

    otlp = cli_export_settings(endpoint, otlp_mode)
    if otlp is not None and (mode == "live" or into == "topic"):
        raise UserError(
            "--otlp-endpoint exports what this replay evaluates: use it with --mode dry and "
            "--into check or embedded (a worker on the target topic exports with its own "
            "--otlp-endpoint)"
        )
    return otlp


def _topic_target(
    broker: str | None, topic: str, timestamps: str, keep_partitions: bool
) -> TopicTarget:
    from evalstream.connectors.kafka.topic_io import TopicWriter
    from evalstream.stream.commands.broker import broker_address
    from evalstream.stream.recordings.replay import TopicTarget

    return TopicTarget(
        TopicWriter(
            broker_address(broker),
            topic,
            keep_timestamps=timestamps == "original",
            keep_partitions=keep_partitions,
        )
    )


def _close_outputs(records: JsonlRecords | None, export: EvaluationExport | None) -> None:
    """Sends the queued evaluation events, closes the `--out` records; a failed write
    becomes the user's error."""
    if export is not None:
        export.close()
    if records is None:
        return
    try:
        records.close()
    except InputError as exc:
        raise UserError(str(exc)) from exc


def _pipeline_target(
    into: str,
    evaluation: dict[str, Any],
    metrics_port: int,
    metrics_host: str,
    records_out: str | None,
    *,
    otlp: OtlpExportSettings | None,
) -> tuple[PipelineTarget, JsonlRecords | None, EvaluationExport | None]:
    """The pipeline in process; for `embedded`, printing as results come (and writing the
    records to `records_out`); with `otlp`, exporting verdicts and scores."""
    from evalstream.stream.cli import load_common  # evalstream.stream.cli imports this module
    from evalstream.stream.console.consoles import output_console
    from evalstream.stream.embedded import ConsoleSink, EmbeddedRun, serve_metrics
    from evalstream.stream.evaluation_export import EvaluationExport
    from evalstream.stream.jsonl_records import STDOUT, JsonlRecords
    from evalstream.stream.pipeline import Sink
    from evalstream.stream.recordings.replay import PipelineTarget
    from evalstream.stream.telemetry.metrics import PipelineMetrics

    loaded = load_common(**evaluation)
    metrics = PipelineMetrics(process=into == "embedded")
    sink: Sink | None = None
    records = None
    if into == "embedded":
        to_stdout = records_out == STDOUT  # then stdout holds only records
        sink = ConsoleSink(output_console(stderr=to_stdout), EmbeddedRun())
        if metrics_port:
            try:
                serve_metrics(metrics, metrics_port, metrics_host)
            except OSError as exc:
                raise UserError(
                    f"cannot serve /metrics on {metrics_host}:{metrics_port}: {exc}; "
                    "pass another --metrics-port"
                ) from exc
        if records_out is not None:
            try:
                sink = records = JsonlRecords.open(records_out, sink)
            except InputError as exc:
                raise UserError(str(exc)) from exc
    export = EvaluationExport(otlp, metrics) if otlp is not None else None
    exporting = export.sink(sink) if export is not None else None
    target = PipelineTarget(
        loaded.suites,
        rules=loaded.rules,
        pricing=loaded.pricing,
        judge=loaded.judge(metrics),
        metrics=metrics,
        sink=exporting or sink,
    )
    if exporting is not None:
        exporting.watch(target.pipeline)
    return target, records, export


async def _run(
    *,
    recordings: tuple[str, ...],
    topic_slice: TopicSlice | None,
    broker: str | None,
    target: Any,
    rename: EpisodeRename,
    pacer: Pacer,
) -> Any:
    """Sends the source to the target with a progress bar on stderr."""
    import asyncio

    from rich.console import Console

    from evalstream.connectors.kafka.topic_io import TopicReader
    from evalstream.stream.commands.broker import broker_address
    from evalstream.stream.recordings.record import progress_bar, stop_on_signals
    from evalstream.stream.recordings.replay import FileSource, Source, TopicSource, replay

    source: Source
    if topic_slice is not None:
        reader = TopicReader(broker_address(broker), topic_slice)
        await reader.start()
        source = TopicSource(reader)
    else:
        source = FileSource(recordings)
    halt = asyncio.Event()
    with (
        stop_on_signals(halt),
        progress_bar(Console(stderr=True), source.total, f"replaying ({source.unit})") as progress,
    ):
        task = progress.add_task("replay", total=source.total)
        return await replay(
            source,
            target,
            rename=rename,
            pacer=pacer,
            halt=halt,
            on_message=lambda: progress.update(task, completed=source.completed()),
        )


def _print_report(
    target: PipelineTarget, into: str, fmt: str, out: str | None, *, to_stderr: bool
) -> None:
    """The report after the replay; `to_stderr`: stdout holds the records."""
    from evalstream.assertions.reports.check_report import (
        render_json,
        render_junit,
        render_markdown,
    )
    from evalstream.stream.console.check_table import print_table
    from evalstream.stream.console.consoles import output_console

    report = target.report()
    if into == "embedded" and out is None and fmt == "table":
        s = report.summary  # the results were printed as they came
        output_console(stderr=to_stderr).print(
            f"{s.passed} passed, {s.failed} failed, {s.errors} errors, "
            f"{s.unevaluated} unevaluated of {s.episodes} episodes; "
            f"{len(report.rejected)} dead letters"
        )
        return
    if fmt == "table":
        if out is None:
            print_table(report, output_console(stderr=to_stderr))
        else:
            with open(out, "w", encoding="utf-8") as handle:
                print_table(report, output_console(file=handle, no_color=True))
        return
    render = {"json": render_json, "markdown": render_markdown, "junit": render_junit}[fmt]
    text = render(report)
    if out is None:
        (sys.stderr if to_stderr else sys.stdout).write(text)
    else:
        Path(out).write_text(text, encoding="utf-8")


def register(group: click.Group) -> None:
    group.add_command(record)
    group.add_command(replay_command)
