"""The embedded runtime (`evalstream up`): the pipeline on in-process queues, no Kafka.

Sources are JSONL files, standard input (`-`) or files followed as they grow (`--follow`).
Verdicts and closed episodes are printed live (and, with `out`, written as JSON lines:
evalstream.stream.jsonl_records); `/metrics` is served for Prometheus. Finite files are replayed in
event time, so the results equal `evalstream check` on the same input.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import start_http_server
from rich.console import Console
from rich.text import Text

from evalstream.assertions.alerting.regression import RegressionDetector
from evalstream.assertions.errors import InputError
from evalstream.assertions.evaluation.assembly import CloseRules
from evalstream.assertions.evaluation.results import EpisodeResult, Summary
from evalstream.assertions.judge.protocol import Judge
from evalstream.assertions.scores.stage import ScoringSettings, ScoringStage
from evalstream.assertions.suite_format.suites import Suite
from evalstream.assertions.wire.pricing import PricingTable
from evalstream.connectors.alert_sinks import AlertSinks
from evalstream.connectors.otel_export.otlp_export import OtlpExportSettings
from evalstream.stream.alerting import AlertFanout, build_alert_sinks
from evalstream.stream.console.rejections import RejectionLog
from evalstream.stream.evaluation_export import EvaluationExport, ExportingSink
from evalstream.stream.jsonl_records import JsonlRecords
from evalstream.stream.pipeline import (
    ALERTS,
    DLQ,
    EPISODES,
    VERDICTS,
    Envelope,
    InlineRegression,
    Pipeline,
    Sink,
)
from evalstream.stream.telemetry.metrics import PipelineMetrics

if TYPE_CHECKING:  # the gateway's modules load only when `up` serves it
    import uvicorn

    from evalstream.connectors.gateway import GatewaySettings, OutRecord

JSON = Any
QUEUE_SIZE = 10_000
TICK_SECONDS = 0.5
FOLLOW_POLL_SECONDS = 0.2


@dataclass
class EmbeddedRun:
    results: list[EpisodeResult] = field(default_factory=list)
    dead_letters: list[dict[str, JSON]] = field(default_factory=list)
    verdicts: int = 0
    alerts: list[dict[str, JSON]] = field(default_factory=list)
    failed_by_alerts: list[str] = field(default_factory=list)  # passed, but a CRITICAL alert
    stopped_by: signal.Signals | None = None  # SIGINT or SIGTERM, when one ended the run

    def exit_code(self) -> int:
        if self.dead_letters:
            return 2
        return 0 if Summary.of(self.results).ok and not self.failed_by_alerts else 1


class ConsoleSink:
    """Prints what the pipeline emits, as it happens; keeps dead letters and results."""

    def __init__(
        self, console: Console | None, run: EmbeddedRun, *, quiet_passes: bool = True
    ) -> None:
        self.console = console
        self.run = run
        self.quiet_passes = quiet_passes
        self.rejections = RejectionLog()
        # (episode, assertion index) of the verdicts printed early: not repeated at close
        self._printed_early: set[tuple[str, int]] = set()

    async def publish(self, stream: str, key: str, record: dict[str, JSON]) -> None:
        if stream == DLQ:
            self.run.dead_letters.append(record)
            line = self.rejections.add(
                record["reason"], f"dead letter ({record['reason']}): {record['message']}"
            )
            if line is not None:
                self._print(line, "yellow")
        elif stream == VERDICTS:
            self.run.verdicts += 1
            verdict = record["verdict"]
            if record["early"] and not (self.quiet_passes and verdict == "pass"):
                self._printed_early.add((record["episode_id"], record["index"]))
                style = {"pass": "green", "fail": "red"}.get(verdict, "yellow")
                self._print(
                    f"{record['episode_id']} [{record['index']}] {record['type']} {verdict} "
                    f"early at {record['decided_at']}: {record['message']}",
                    style,
                )
        elif stream == ALERTS:
            self.run.alerts.append(record)
            style = "red" if record["severity"] == "critical" else "yellow"
            self._print(
                f"alert {record['severity']} ({record['kind']}): {record['message']}", style
            )
        elif stream == EPISODES:
            if record.get("passed_with_alerts") is False and record["status"] == "passed":
                self.run.failed_by_alerts.append(record["episode_id"])
            status = record["status"]
            style = {"passed": "green", "failed": "red", "error": "yellow"}.get(status, "dim")
            ok = sum(1 for a in record["assertions"] if a["verdict"] == "pass")
            self._print(
                f"{record['episode_id']} ({record['case_id'] or 'no case'}) {status}: "
                f"{ok}/{len(record['assertions'])} assertions, {record['close_reason']}",
                style,
            )
            self._print_failures_at_close(record)

    def finish(self) -> None:
        """The dead letters not printed one by one, counted by reason."""
        for line in self.rejections.totals():
            self._print(line, "yellow")

    def _print_failures_at_close(self, episode: dict[str, JSON]) -> None:
        """Each assertion that did not pass, named like an early verdict (those printed
        early are not repeated)."""
        episode_id = episode["episode_id"]
        for a in episode["assertions"]:
            if (episode_id, a["index"]) in self._printed_early:
                self._printed_early.discard((episode_id, a["index"]))
            elif a["verdict"] != "pass":
                when = f"at {a['decided_at']}" if a["decided_at"] else "at close"
                self._print(
                    f"{episode_id} [{a['index']}] {a['type']} {a['verdict']} {when}: "
                    f"{a['message']}",
                    "red" if a["verdict"] == "fail" else "yellow",
                )

    def _print(self, text: str, style: str) -> None:
        if self.console is not None:
            self.console.print(Text(text, style=style))


async def _read_lines(path: str, follow: bool) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    if path == "-":
        stream = sys.stdin.buffer
        while True:
            line = await loop.run_in_executor(None, stream.readline)
            if not line:
                return
            yield line
    try:
        handle = Path(path).open("rb")  # noqa: SIM115 - closed in finally; read across awaits
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        pending = b""
        while True:
            chunk = handle.readline()
            if chunk:
                pending += chunk
                if pending.endswith(b"\n"):
                    yield pending
                    pending = b""
                continue
            if not follow:
                if pending:
                    yield pending
                return
            await asyncio.sleep(FOLLOW_POLL_SECONDS)  # a followed file grows: poll
    finally:
        handle.close()


async def run_embedded(
    sources: list[str],
    suites: list[Suite],
    *,
    rules: CloseRules | None = None,
    pricing: PricingTable | None = None,
    judge: Judge | None = None,
    follow: bool = False,
    metrics: PipelineMetrics | None = None,
    console: Console | None = None,
    run: EmbeddedRun | None = None,
    scoring: ScoringSettings | None = None,
    gateway: GatewaySettings | None = None,
    stop_on_signals: bool = False,
    out: str | None = None,
    otlp: OtlpExportSettings | None = None,
) -> EmbeddedRun:
    """Runs until the sources end (never, when following or serving the gateway); `run`
    collects results live. `gateway`: also serve the HTTP gateway, feeding this pipeline.

    `stop_on_signals`: SIGINT and SIGTERM stop reading, close the open episodes (printed
    like any other) and return normally with `run.stopped_by` set; a second signal acts as
    if none were handled (SIGINT raises KeyboardInterrupt, SIGTERM kills).

    With `scoring`, closed episodes are scored against their baselines, per-episode alert
    rules apply and windowed regressions are detected in-process.

    `out`: also write the episode and verdict records, as the worker publishes them, as
    JSON lines to this file (`-`: standard output).

    `otlp`: also export verdicts and scores as OpenTelemetry evaluation events; what is
    queued is sent before this returns (within the exporter's close timeout)."""
    run = run if run is not None else EmbeddedRun()
    live = follow or "-" in sources or gateway is not None
    metrics = metrics or PipelineMetrics(process=False)
    outputs = await _Outputs.open(ConsoleSink(console, run), out, scoring, metrics, otlp)
    sink = outputs.sink
    pipeline = Pipeline(
        suites,
        sink,
        rules=rules,
        pricing=pricing,
        judge=judge,
        metrics=metrics,
        on_result=run.results.append,
        event_time=not live,
        **_scoring_stages(scoring, sink, metrics),
    )
    outputs.watch(pipeline)
    queue: asyncio.Queue[Envelope | None] = asyncio.Queue(maxsize=QUEUE_SIZE)

    async def produce(path: str) -> None:
        line_no = 0
        async for line in _read_lines(path, follow):
            line_no += 1
            stripped = line.strip()
            if stripped:
                await queue.put(
                    Envelope(topic="signals", value=stripped, partition=None, offset=line_no)
                )

    async def produce_all() -> None:
        try:
            await asyncio.gather(*(produce(p) for p in sources))
        finally:
            if gateway is None and run.stopped_by is None:  # stopped: nobody reads the queue
                await queue.put(None)

    async def ticker() -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            await pipeline.tick()

    server = _gateway_server(gateway, queue) if gateway is not None else None
    serving = asyncio.create_task(server.serve()) if server is not None else None
    producer = asyncio.create_task(produce_all())
    tick = asyncio.create_task(ticker()) if live else None
    with _stop_on_signals(run, queue, console, stop_on_signals):
        try:
            while (env := await queue.get()) is not None and run.stopped_by is None:
                await pipeline.handle(env)
            if run.stopped_by is None:
                await producer  # re-raises a source error (e.g. an unreadable file)
        finally:
            if server is not None and serving is not None:
                server.should_exit = True
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
            await _cancel(tick, producer)
            await pipeline.drain()
            await outputs.close()  # raises when the records could not be written
    return run


@dataclass
class _Outputs:
    """Where the pipeline's records go: printed, written to `out`, alerts to their sinks,
    verdicts and scores exported over OTLP; the outermost sink is `sink`."""

    console_sink: ConsoleSink
    sink: Sink
    records: JsonlRecords | None = None
    alert_sinks: AlertSinks | None = None
    exporting: ExportingSink | None = None

    @staticmethod
    async def open(
        console_sink: ConsoleSink,
        out: str | None,
        scoring: ScoringSettings | None,
        metrics: PipelineMetrics,
        otlp: OtlpExportSettings | None,
    ) -> _Outputs:
        outputs = _Outputs(console_sink, console_sink)
        if out is not None:
            outputs.sink = outputs.records = JsonlRecords.open(out, console_sink)
        outputs.alert_sinks = build_alert_sinks(scoring, metrics) if scoring else None
        if outputs.alert_sinks is not None:
            outputs.sink = AlertFanout(outputs.sink, outputs.alert_sinks)
            await outputs.alert_sinks.start()
        if otlp is not None:
            outputs.sink = outputs.exporting = EvaluationExport(otlp, metrics).sink(outputs.sink)
        return outputs

    def watch(self, pipeline: Pipeline) -> None:
        if self.exporting is not None:
            self.exporting.watch(pipeline)

    async def close(self) -> None:
        """Delivers what is queued (OTLP events, alerts, within their timeouts), then
        finishes the console and the records."""
        if self.exporting is not None:
            await asyncio.to_thread(self.exporting.export.close)
        if self.alert_sinks is not None:
            await self.alert_sinks.close()
        self.console_sink.finish()
        if self.records is not None:
            self.records.close()


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _stop_on_signals(
    run: EmbeddedRun,
    queue: asyncio.Queue[Envelope | None],
    console: Console | None,
    enabled: bool,
) -> Iterator[None]:
    """While inside: SIGINT and SIGTERM end the input (the open episodes are then closed
    and reported); the handlers go after the first signal, so a second one acts unhandled."""
    loop = asyncio.get_running_loop()
    signals = _STOP_SIGNALS if enabled else ()

    def remove() -> None:
        for sig in signals:
            loop.remove_signal_handler(sig)

    def stop(signum: signal.Signals) -> None:
        run.stopped_by = signum
        remove()
        if console is not None:
            console.print(Text(f"{signum.name}: stopping, closing the open episodes", "yellow"))
        with contextlib.suppress(asyncio.QueueFull):  # full: the loop checks stopped_by
            queue.put_nowait(None)

    for sig in signals:
        loop.add_signal_handler(sig, stop, sig)
    try:
        yield
    finally:
        remove()


async def _cancel(*tasks: asyncio.Task[None] | None) -> None:
    for task in tasks:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, InputError):
                await task


def _scoring_stages(
    scoring: ScoringSettings | None, sink: Sink, metrics: PipelineMetrics
) -> dict[str, Any]:
    """The pipeline's scoring stage and in-process regression detection, when configured."""
    if scoring is None:
        return {}
    # One detector: the rolling baselines hold while a stream's regression fires.
    detector = RegressionDetector(scoring.regression)
    return {
        "scoring": ScoringStage(scoring, scoring.baseline_store(), detector.holding),
        "regression": InlineRegression(detector, sink, metrics),
    }


class PipelineFeed:
    """The in-process `Publisher`: the gateway's records go straight into the embedded
    pipeline's queue. A batch is taken whole or refused (503) when the queue lacks room."""

    def __init__(self, queue: asyncio.Queue[Envelope | None]) -> None:
        self.queue = queue

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def publish(self, records: Sequence[OutRecord]) -> None:
        from evalstream.connectors.gateway import Unavailable  # noqa: PLC0415 - loaded with the gateway

        free = self.queue.maxsize - self.queue.qsize() if self.queue.maxsize else len(records)
        if free < len(records):
            raise Unavailable(
                "buffer_full", f"the pipeline queue has room for {free} of {len(records)} records"
            )
        for record in records:
            self.queue.put_nowait(
                Envelope(topic=record.stream, value=record.value, key=record.key.encode())
            )

    async def ready(self) -> bool:
        return True


def _gateway_server(
    settings: GatewaySettings, queue: asyncio.Queue[Envelope | None]
) -> uvicorn.Server:
    import uvicorn  # noqa: PLC0415 - see the TYPE_CHECKING imports

    from evalstream.connectors.gateway import create_gateway_app  # noqa: PLC0415

    class EmbeddedServer(uvicorn.Server):
        # The embedded runtime owns Ctrl-C (asyncio.run cancels it; it drains the pipeline).
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    app = create_gateway_app(settings, PipelineFeed(queue))
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level="warning", access_log=False
    )
    return EmbeddedServer(config)


def serve_metrics(metrics: PipelineMetrics, port: int, host: str = "127.0.0.1") -> None:
    """Serve /metrics in a background thread (prometheus_client's server)."""
    start_http_server(port, addr=host, registry=metrics.registry)
