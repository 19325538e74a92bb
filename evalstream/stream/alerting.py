"""Alert delivery beyond the alerts topic: the webhook and Slack sinks of the scoring settings.

`AlertFanout` wraps a pipeline sink: every record of the alerts stream is also offered to the
configured sinks (a bounded queue each, retried in the background, so a slow or failing
webhook never blocks evaluation; failures are counted in
`evalstream_alert_sink_failures_total{sink}`).
"""

from __future__ import annotations

from typing import Any

from evalstream.assertions.scores.stage import ScoringSettings
from evalstream.connectors.alert_sinks import AlertSinks, make_sink
from evalstream.stream.pipeline import ALERTS, Sink
from evalstream.stream.telemetry.metrics import PipelineMetrics

JSON = Any


def build_alert_sinks(settings: ScoringSettings, metrics: PipelineMetrics) -> AlertSinks | None:
    """The configured sinks (not started), or None when there are none."""
    if not settings.sinks:
        return None

    def failed(sink: str, reason: str) -> None:
        del reason  # the counter is per sink; the sink logs and keeps the reason in its stats
        metrics.alert_sink_failures.labels(sink).inc()

    for spec in settings.sinks:  # every sink's failure series exists from the start
        metrics.alert_sink_failures.labels(str(spec["name"]))
    return AlertSinks(
        make_sink(
            str(spec["kind"]),
            str(spec["name"]),
            str(spec["url"]),
            on_failure=failed,
            **{k: v for k, v in spec.items() if k not in ("kind", "name", "url")},
        )
        for spec in settings.sinks
    )


class AlertFanout:
    """A sink that also hands alert records to the webhook sinks."""

    def __init__(self, inner: Sink, sinks: AlertSinks) -> None:
        self.inner = inner
        self.sinks = sinks

    async def publish(self, stream: str, key: str, record: dict[str, JSON]) -> None:
        await self.inner.publish(stream, key, record)
        if stream == ALERTS:
            self.sinks.offer(record)
