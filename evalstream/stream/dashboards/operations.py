"""The operations dashboard: workers, Kafka consumer lag, dead letters, evaluation latency,
the LLM judge (calls, cost, latency), evaluation events to OTLP, alert delivery and memory."""

from __future__ import annotations

from evalstream.stream.dashboards.board import RATE, Board, Query, quantile, rate

TARGETS = 'job=~"evalstream.*"'


def build(datasource_uid: str) -> Board:
    b = Board(
        "evalstream-operations",
        "evalstream / Operations",
        "Health of the workers and gateway: lag, dead letters, latency, judge, memory.",
        datasource_uid=datasource_uid,
    )
    b.row("Processes")
    b.timeseries(
        "Scrape targets up",
        "1 when Prometheus reached the worker or gateway at its last scrape.",
        [Query(f"up{{{TARGETS}}}", "{{job}} {{instance}}")],
        width=8,
        min_value=0,
        max_value=1,
    )
    b.timeseries(
        "Resident memory",
        "Resident memory of each process (open episodes live in memory).",
        [Query(f"process_resident_memory_bytes{{{TARGETS}}}", "{{instance}}")],
        unit="bytes",
        width=8,
    )
    b.timeseries(
        "CPU",
        "CPU seconds per second of each process.",
        [Query(f"rate(process_cpu_seconds_total{{{TARGETS}}}[{RATE}])", "{{instance}}")],
        unit="percentunit",
        width=8,
    )

    b.row("Kafka")
    b.timeseries(
        "Consumer lag per partition",
        "Messages between the workers' position and the end of each signals partition.",
        [
            Query(
                "max by (topic, partition) (evalstream_consumer_lag)",
                "{{topic}}/{{partition}}",
            )
        ],
    )
    b.timeseries(
        "Signals consumed/s",
        "Messages read per second by source topic.",
        [Query(rate("evalstream_signals_consumed_total", group=["source"]), "{{source}}")],
    )

    b.row("Input quality")
    b.timeseries(
        "Dead letters by reason",
        "Input sent to the dead-letter topic per second, by reason.",
        [Query(rate("evalstream_signals_rejected_total", group=["reason"]), "{{reason}}")],
        stacked=True,
    )
    b.timeseries(
        "Duplicates and late signals",
        "Duplicate deliveries dropped, and signals for already closed episodes, per second.",
        [
            Query(rate("evalstream_duplicate_signals_total"), "duplicates"),
            Query(rate("evalstream_late_signals_total"), "late"),
        ],
    )

    b.row("Evaluation")
    b.timeseries(
        "Evaluation latency",
        "Wall time to decode, assemble, evaluate and emit one message.",
        [
            Query(quantile(0.5, "evalstream_evaluation_latency_seconds"), "p50"),
            Query(quantile(0.99, "evalstream_evaluation_latency_seconds"), "p99"),
        ],
        unit="s",
    )
    b.timeseries(
        "Verdict delay",
        "Wall clock at emission minus the deciding signal's event time.",
        [
            Query(quantile(0.5, "evalstream_verdict_delay_seconds"), "p50"),
            Query(quantile(0.95, "evalstream_verdict_delay_seconds"), "p95"),
        ],
        unit="s",
    )

    b.row("LLM judge")
    b.timeseries(
        "Judge calls by outcome",
        "LLM judge calls per second: ok, error, cached.",
        [Query(rate("evalstream_judge_calls_total", group=["outcome"]), "{{outcome}}")],
        width=8,
        stacked=True,
    )
    b.timeseries(
        "Judge cost",
        "US dollars spent on judge calls (cache tokens priced in), per hour at the current rate.",
        [Query(f"{rate('evalstream_judge_spend_usd_total')} * 3600", "USD/h")],
        unit="currencyUSD",
        width=8,
    )
    b.timeseries(
        "Judge latency",
        "Wall time of one judge call.",
        [
            Query(quantile(0.5, "evalstream_judge_latency_seconds"), "p50"),
            Query(quantile(0.95, "evalstream_judge_latency_seconds"), "p95"),
        ],
        unit="s",
        width=8,
    )

    b.row("Evaluations to OpenTelemetry")
    b.timeseries(
        "Evaluation events to OTLP",
        "Evaluation events per second on their way to the OTLP endpoint (--otlp-endpoint), "
        "by outcome: sent, dropped (queue full), failed (refused or retries exhausted).",
        [Query(rate("evalstream_otlp_export_events_total", group=["outcome"]), "{{outcome}}")],
        stacked=True,
    )

    b.row("Episodes and alert delivery")
    b.timeseries(
        "Episodes closed by reason",
        "Closed episodes per second: ended, timed_out, truncated.",
        [
            Query(
                rate("evalstream_episodes_closed_total", group=["reason"]),
                "{{reason}}",
                exemplars=True,
            )
        ],
        stacked=True,
    )
    b.timeseries(
        "Alert delivery failures",
        "Alert deliveries that failed after their retries, per second, by sink.",
        [Query(rate("evalstream_alert_sink_failures_total", group=["sink"]), "{{sink}}")],
    )
    return b
