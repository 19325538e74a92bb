"""The pipeline's verdicts and scores out as OpenTelemetry evaluation events
(`--otlp-endpoint`, `--otlp-mode` on `up`, `worker`, `check` and `replay`).

`ExportingSink` wraps a pipeline sink: an early verdict becomes an event when it is
published; at close, the episode record gives the other verdicts and the scores (it carries
the episode's attributes, which a verdict record does not). `check` offers its closed
episodes' records whole (`offer_episode`). Mapping is
evalstream/connectors/otel_export/evaluation_events.py, the export thread
evalstream/connectors/otel_export/otlp_export.py: evaluation never waits for the network.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from evalstream.assertions.errors import InputError
from evalstream.connectors.otel_export.evaluation_events import episode_events, verdict_event
from evalstream.connectors.otel_export.otlp_export import (
    MODES,
    ExportStats,
    OtlpExporter,
    OtlpExportSettings,
    resolve_settings,
)
from evalstream.stream.commands.user_error import UserError
from evalstream.stream.pipeline import EPISODES, VERDICTS, Pipeline, Sink
from evalstream.stream.telemetry.metrics import PipelineMetrics

JSON = Any
log = logging.getLogger(__name__)
OUTCOMES = ("sent", "dropped", "failed")


def export_settings(
    endpoint: str | None, mode: str | None, env: Mapping[str, str]
) -> OtlpExportSettings | None:
    """None (no export) unless an endpoint or a mode is given; raises OtlpExportError (an
    InputError) for settings that cannot work."""
    if not endpoint and not mode:
        return None
    return resolve_settings(endpoint, mode or MODES[0], env)


def evaluation_export(
    endpoint: str | None, mode: str | None, metrics: PipelineMetrics | None
) -> EvaluationExport | None:
    """The export of `--otlp-endpoint` / `--otlp-mode` and the process environment, started;
    None without either."""
    settings = export_settings(endpoint, mode, os.environ)
    return EvaluationExport(settings, metrics) if settings is not None else None


def cli_export_settings(endpoint: str | None, mode: str | None) -> OtlpExportSettings | None:
    """`export_settings` from the process environment; bad settings are the user's error."""
    try:
        return export_settings(endpoint, mode, os.environ)
    except InputError as exc:
        raise UserError(str(exc)) from exc


class EvaluationExport:
    """The exporter, fed from pipeline records and counted on the pipeline's metrics."""

    def __init__(
        self,
        settings: OtlpExportSettings,
        metrics: PipelineMetrics | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.clock_ns = clock_ns
        on_events = on_retry = None
        if metrics is not None:
            events, retries = metrics.otlp_export_events, metrics.otlp_export_retries
            for outcome in OUTCOMES:  # every series from the start: a rate reads 0, not nothing
                events.labels(settings.signal, outcome)

            def on_events(signal: str, outcome: str, n: int) -> None:
                events.labels(signal, outcome).inc(n)

            on_retry = retries.inc
        self.exporter = OtlpExporter(settings, on_events=on_events, on_retry=on_retry)

    def offer_verdict(self, record: dict[str, JSON], attrs: dict[str, JSON] | None) -> None:
        try:
            event = verdict_event({**record, "attrs": attrs} if attrs else record, self.clock_ns())
        except Exception:  # a mapping bug costs this event, never the evaluation
            self._unmapped(record, 1)
            return
        if event is not None:
            self.exporter.offer(event)

    def offer_episode(self, record: dict[str, JSON], *, with_early: bool = True) -> None:
        """A closed episode's verdicts (those decided early too, unless they were offered
        when decided) and its scores."""
        try:
            events = episode_events(record, self.clock_ns(), with_early=with_early)
        except Exception:
            self._unmapped(record, 1)
            return
        for event in events:
            self.exporter.offer(event)

    def _unmapped(self, record: dict[str, JSON], n: int) -> None:
        log.exception("evaluation event of episode %r not exported", record.get("episode_id"))
        self.exporter.count_failed(n)

    def sink(self, inner: Sink | None) -> ExportingSink:
        return ExportingSink(inner, self)

    def close(self, timeout_s: float = 10.0) -> ExportStats:
        return self.exporter.close(timeout_s)


class ExportingSink:
    """Publishes to `inner`, then offers verdicts and closed episodes to the export.

    `watch(pipeline)` lets an early verdict carry its open episode's attributes (a
    `trace_id` attribute names the trace its events belong to)."""

    def __init__(self, inner: Sink | None, export: EvaluationExport) -> None:
        self.inner = inner
        self.export = export
        self._pipeline: Pipeline | None = None

    def watch(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    async def publish(self, stream: str, key: str, record: dict[str, JSON]) -> None:
        if self.inner is not None:
            await self.inner.publish(stream, key, record)
        if stream == VERDICTS:
            if record.get("early"):
                self.export.offer_verdict(record, self._open_attrs(record.get("episode_id")))
        elif stream == EPISODES:
            self.export.offer_episode(record, with_early=False)

    def _open_attrs(self, episode_id: JSON) -> dict[str, JSON] | None:
        if self._pipeline is None or not isinstance(episode_id, str):
            return None
        episode = self._pipeline.assembler.open.get(episode_id)
        return episode.attrs if episode is not None else None
