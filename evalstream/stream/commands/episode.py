"""`evalstream episode ID`: one episode as a timeline, from Kafka or from files.

From Kafka (no FILES): the deployment's episodes, verdicts, alerts and signals topics (names
from the worker's settings), only the partition of the id, within --since/--until. From
FILES: a `check --format json` results file, JSONL of output records, or signals (a
recording or JSONL; evaluated with --suite as `check` does).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from evalstream.assertions.errors import InputError
from evalstream.stream.commands.user_error import UserError

if TYPE_CHECKING:
    from evalstream.assertions.reports.episode_timeline import EpisodeEvidence


@click.command("episode")
@click.argument("episode_id")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@click.option(
    "--format", "-f", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True
)
@click.option(
    "--since",
    default="24h",
    show_default=True,
    help="Kafka: start of the window: a duration ago (90m, 7d), RFC 3339 or epoch ms.",
)
@click.option("--until", help="Kafka: end of the window (same forms; default: now).")
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Worker settings YAML (topic prefix, broker).",
)
@click.option("--broker", help="Kafka bootstrap servers (EVALSTREAM_BROKER).")
@click.option("--topic-prefix", help="Topic name prefix (EVALSTREAM_TOPIC_PREFIX).")
@click.option(
    "--suite",
    "-s",
    "suites",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="FILES of signals: evaluate them with this suite (repeatable), as `check` does.",
)
@click.option("--pricing", type=click.Path(exists=True, dir_okay=False))
@click.option("--end-signal", "end_signals", multiple=True)
@click.option("--grace-ms", type=float, default=2000.0, show_default=True)
@click.option("--inactivity-ms", type=float, default=300_000.0, show_default=True)
@click.option("--reorder-ms", type=float, default=0.0, show_default=True)
def episode(
    *,
    episode_id: str,
    files: tuple[str, ...],
    fmt: str,
    since: str,
    until: str | None,
    config_file: str | None,
    broker: str | None,
    topic_prefix: str | None,
    **evaluation: Any,
) -> None:
    """Show episode EPISODE_ID as a timeline: signals with their causal parents, each failed
    assertion next to the signal that decided it, scores against the baseline, alerts.

    Without FILES it reads the deployment's topics; every instance of a reopened id is shown,
    newest last. Exit 0 when found, 2 when not (the message says where it looked)."""
    import orjson

    from evalstream.assertions.reports.episode_timeline import assemble_timeline, render_text

    if files:
        evidence = _from_files(episode_id, files, evaluation)
    elif evaluation["suites"]:
        raise UserError(
            "--suite evaluates FILES of signals; on Kafka the worker's own verdicts are read: "
            "drop --suite, or pass the recording to evaluate"
        )
    else:
        evidence = _from_kafka(
            episode_id,
            since=since,
            until=until,
            config_file=config_file,
            broker=broker,
            topic_prefix=topic_prefix,
        )
    timeline = assemble_timeline(evidence)
    if fmt == "json":
        sys.stdout.write(
            orjson.dumps(timeline.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n"
        )
    else:
        sys.stdout.write(render_text(timeline))


def _from_files(
    episode_id: str, files: tuple[str, ...], evaluation: dict[str, Any]
) -> EpisodeEvidence:
    from evalstream.stream.cli import load_common  # evalstream.stream.cli imports this module
    from evalstream.stream.episode_drilldown import evidence_from_files

    suites: tuple[str, ...] = evaluation.pop("suites")
    loaded = load_common(suites, judge_spec=None, **evaluation)
    try:
        evidence, rejected = evidence_from_files(
            list(files),
            episode_id,
            suites=loaded.suites,
            rules=loaded.rules,
            pricing=loaded.pricing,
            judge=loaded.judge(),
        )
    except InputError as exc:
        raise UserError(str(exc)) from exc
    if rejected:
        click.echo(f"warning: {rejected} input line(s) are not valid signals", err=True)
    return evidence


def _from_kafka(
    episode_id: str,
    *,
    since: str,
    until: str | None,
    config_file: str | None,
    broker: str | None,
    topic_prefix: str | None,
) -> EpisodeEvidence:
    import asyncio
    import logging

    from evalstream.stream.cli import settings_from  # evalstream.stream.cli imports this module
    from evalstream.stream.episode_drilldown import evidence_from_kafka
    from evalstream.stream.recordings.record import parse_time

    settings = settings_from(config_file, broker=broker, topic_prefix=topic_prefix)
    # The command reports an unreachable broker itself, once; aiokafka would log each retry.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        since_ms = parse_time(since)
        until_ms = parse_time(until) if until else None
        if until_ms is not None and until_ms <= since_ms:
            raise InputError(f"--until {until!r} is not after --since {since!r}; swap them")
        return asyncio.run(evidence_from_kafka(settings, episode_id, since_ms, until_ms)).evidence
    except InputError as exc:
        raise UserError(str(exc)) from exc


def register(group: click.Group) -> None:
    group.add_command(episode)
