"""The overview dashboard: traffic, open episodes, outcomes, verdicts, early verdicts, alerts."""

from __future__ import annotations

from evalstream.stream.dashboards.board import Board, Query, quantile, rate

CLOSED = "evalstream_episodes_closed_total"
PASSED = 'outcome="passed"'
EVALUATED = 'outcome=~"passed|failed|error"'  # unevaluated episodes have no verdict


def build(datasource_uid: str) -> Board:
    b = Board(
        "evalstream-overview",
        "evalstream / Overview",
        "Signals in, episodes open and closed, pass rates, verdicts and alerts.",
        datasource_uid=datasource_uid,
    )
    b.row("Now")
    b.stat(
        "Signals/s",
        "Signals read from every source, per second, over all workers.",
        Query(rate("evalstream_signals_consumed_total")),
        unit="short",
        decimals=1,
    )
    b.stat(
        "Open episodes",
        "Episodes currently open (started, not yet closed).",
        Query("sum(evalstream_open_episodes)"),
    )
    b.stat(
        "Pass rate",
        "Share of evaluated episodes that passed, over the dashboard's time range.",
        Query(
            f"sum(increase({CLOSED}{{{PASSED}}}[$__range])) / "
            f"sum(increase({CLOSED}{{{EVALUATED}}}[$__range]))"
        ),
        unit="percentunit",
        decimals=1,
    )
    b.stat(
        "Episodes closed/s",
        "Episodes closed per second, whatever their outcome.",
        Query(rate(CLOSED)),
        decimals=2,
    )
    b.stat(
        "Dead letters/s",
        "Input rejected to the dead-letter topic, per second.",
        Query(rate("evalstream_signals_rejected_total")),
        decimals=2,
    )
    b.stat(
        "Alerts firing",
        "Windowed regression alerts currently firing (0 before any agent is scored: the "
        "series exist per agent from its first episode).",
        Query("sum(evalstream_regression_alerts_firing) or vector(0)"),
    )

    b.row("Traffic")
    b.timeseries(
        "Signals/s by source",
        "Signals read per second, by source topic (or file).",
        [Query(rate("evalstream_signals_consumed_total", group=["source"]), "{{source}}")],
        unit="short",
    )
    b.timeseries(
        "Open episodes by worker",
        "Episodes open per worker; the sum is what the workers hold in memory.",
        [Query("sum by (instance) (evalstream_open_episodes)", "{{instance}}")],
    )

    b.row("Outcomes")
    b.timeseries(
        "Pass rate by agent",
        "Passed / evaluated episodes closed in the rate window, by agent.",
        [
            Query(
                f"{rate(CLOSED, PASSED, ['agent'])} / {rate(CLOSED, EVALUATED, ['agent'])}",
                "{{agent}}",
                exemplars=True,
            )
        ],
        unit="percentunit",
        min_value=0,
        max_value=1,
    )
    b.timeseries(
        "Episodes closed by outcome",
        "Closed episodes per second by outcome (passed, failed, error, unevaluated).",
        [Query(rate(CLOSED, group=["outcome"]), "{{outcome}}", exemplars=True)],
        stacked=True,
    )

    b.row("Assertions")
    b.timeseries(
        "Verdicts by assertion type",
        "Assertion verdicts per second, by assertion type and verdict.",
        [
            Query(
                rate("evalstream_verdicts_total", group=["type", "verdict"]),
                "{{type}} {{verdict}}",
                exemplars=True,
            )
        ],
        stacked=True,
    )
    b.timeseries(
        "Early-verdict lead time",
        "How long before its episode ended an early verdict was decided (event time).",
        [
            Query(
                quantile(0.5, "evalstream_early_verdict_lead_seconds", group=["type"]),
                "p50 {{type}}",
                exemplars=True,
            ),
            Query(quantile(0.95, "evalstream_early_verdict_lead_seconds"), "p95 all types"),
        ],
        unit="s",
    )

    b.row("Alerts")
    b.timeseries(
        "Regression alerts firing",
        "Windowed regression alerts firing, by agent, severity and dimension.",
        [
            Query(
                "sum by (agent, severity, dimension) (evalstream_regression_alerts_firing)",
                "{{agent}} {{severity}} {{dimension}}",
            )
        ],
    )
    b.timeseries(
        "Per-episode alerts",
        "Per-episode alert rules that fired, per second, by agent, severity and dimension.",
        [
            Query(
                rate("evalstream_episode_alerts_total", group=["agent", "severity", "dimension"]),
                "{{agent}} {{severity}} {{dimension}}",
                exemplars=True,
            )
        ],
        stacked=True,
    )
    return b
