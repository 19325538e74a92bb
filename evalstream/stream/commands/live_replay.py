"""`evalstream replay --mode live`: the recorded LLM requests, re-issued to a candidate."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from evalstream.assertions.errors import InputError
from evalstream.connectors.anthropic_api.messages_replay import MessagesClient
from evalstream.connectors.files.recording import EpisodeRename
from evalstream.connectors.kafka.topic_io import TopicReader, TopicSlice
from evalstream.stream.commands.broker import broker_address
from evalstream.stream.commands.user_error import UserError
from evalstream.stream.console.consoles import output_console
from evalstream.stream.recordings.live_replay import DEFAULT_SUFFIX, LiveReplayer, LiveReport
from evalstream.stream.recordings.record import stop_on_signals
from evalstream.stream.recordings.replay import FileSource, Source, TopicSource


def run_live(
    *,
    recordings: tuple[str, ...],
    topic_slice: TopicSlice | None,
    broker: str | None,
    rename: EpisodeRename,
    base_url: str | None,
    model: str | None,
    api_key_env: str,
    concurrency: int,
    fmt: str,
    out: str | None,
    evaluation: dict[str, Any],
) -> None:
    from evalstream.stream.cli import load_common

    if not base_url:
        raise UserError(
            "--mode live needs --base-url: the candidate's Messages API (or the recording proxy)"
        )
    if not evaluation["suites"]:
        raise UserError("--mode live evaluates both runs: pass --suite FILE (repeatable)")
    if fmt not in ("table", "json"):
        raise UserError(f"--mode live reports as table or json, not {fmt!r}")
    loaded = load_common(**evaluation)
    if loaded.judge_spec is not None:
        raise UserError("--judge: a live replay asks no LLM judge (llm.judge is `error`)")
    client = MessagesClient(base_url, api_key=os.environ.get(api_key_env), model=model)
    replayer = LiveReplayer(
        client,
        loaded.suites,
        rename=rename if rename else EpisodeRename(suffix=DEFAULT_SUFFIX),
        rules=loaded.rules,
        pricing=loaded.pricing,
        variant=model or "candidate",
        concurrency=concurrency,
    )

    async def run() -> LiveReport:
        source: Source
        if topic_slice is not None:
            reader = TopicReader(broker_address(broker), topic_slice)
            await reader.start()
            source = TopicSource(reader)
        else:
            source = FileSource(recordings)
        halt = asyncio.Event()
        try:
            with stop_on_signals(halt):
                return await replayer.run(source, halt)
        finally:
            await client.close()

    try:
        report = asyncio.run(run())
    except InputError as exc:
        raise UserError(str(exc)) from exc
    if fmt == "json":
        import orjson

        text = orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n"
        if out:
            Path(out).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
    elif out:
        with open(out, "w", encoding="utf-8") as handle:
            _print_table(report, output_console(file=handle, no_color=True))
    else:
        _print_table(report, output_console())
    summary = report.to_json()["summary"]
    click.echo(
        f"live replay: {summary['passed']} of {summary['episodes']} candidate episodes passed; "
        f"{summary['reissued_calls']} calls re-issued, {summary['failed_calls']} failed",
        err=True,
    )
    sys.exit(130 if report.interrupted else report.exit_code())


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.1f}%" if pct else f"{value:.2f}"


def _print_table(report: LiveReport, console: Console) -> None:
    table = Table(title="evalstream replay --mode live")
    for column in (
        "candidate",
        "status",
        "overall",
        "correct",
        "cost Δ",
        "latency Δ",
        "tools",
        "safety",
        "alerts",
    ):
        table.add_column(column, overflow="fold")
    for p in report.pairs:
        s = p.scores
        table.add_row(
            p.candidate.episode_id,
            "passed" if p.passed else "failed",
            _fmt(s.overall),
            _fmt(s.correctness),
            _fmt(s.cost_delta_pct, pct=True),
            _fmt(s.latency_delta_pct, pct=True),
            _fmt(s.tool_match),
            _fmt(s.safety),
            ", ".join(f"{a.severity.value} {a.dimension}" for a in p.alerts) or "—",
        )
    console.print(table)
