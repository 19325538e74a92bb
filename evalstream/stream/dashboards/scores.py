"""The scores dashboard: the five dimensions and the overall score over time by agent and
variant, and the deltas against the baselines."""

from __future__ import annotations

from evalstream.stream.dashboards.board import Board, Query, mean, quantile, rate

SCORE = "evalstream_episode_score"
DELTA = "evalstream_baseline_delta_percent"
FILTER = 'agent=~"$agent", variant=~"$variant"'
DIMENSIONS = (
    ("overall", "Overall score", "The weighted sum of the five dimensions."),
    ("correctness", "Correctness", "Weighted share of applicable assertions passed."),
    ("cost", "Cost score", "1 for no rise against the baseline, falling with the cost rise."),
    ("latency", "Latency score", "1 for no rise against the baseline, falling with latency."),
    ("tool_match", "Tool match", "F1 of the longest common subsequence of tool calls."),
    ("safety", "Safety", "1 minus penalties for policy violations, errors and detector hits."),
)


def build(datasource_uid: str) -> Board:
    b = Board(
        "evalstream-scores",
        "evalstream / Scores",
        "Five-dimension episode scores by agent and variant, and deltas against baselines.",
        datasource_uid=datasource_uid,
    )
    b.variable("agent", "Agent", f"{SCORE}_count")
    b.variable("variant", "Variant", f"{SCORE}_count")
    b.row("Scores (mean and median per episode in the rate window)")
    for dimension, title, description in DIMENSIONS:
        labels = f'dimension="{dimension}", {FILTER}'
        b.timeseries(
            title,
            f"{description} The median comes from the score buckets, whose exemplars link "
            "to the episodes.",
            [
                Query(mean(SCORE, labels, ["agent", "variant"]), "{{agent}} {{variant}}"),
                Query(
                    quantile(0.5, SCORE, labels, ["agent", "variant"]),
                    "p50 {{agent}} {{variant}}",
                    exemplars=True,
                ),
            ],
            unit="percentunit",
            width=8,
            min_value=0,
            max_value=1,
        )

    b.row("Against the baseline")
    for dimension, title in (
        ("cost", "Cost Δ% vs baseline"),
        ("latency", "Latency Δ% vs baseline"),
    ):
        labels = f'dimension="{dimension}", {FILTER}'
        b.timeseries(
            title,
            f"Signed {dimension} change against each episode's baseline: median and p90.",
            [
                Query(
                    quantile(0.5, DELTA, labels, ["agent", "variant"]),
                    "p50 {{agent}} {{variant}}",
                    exemplars=True,
                ),
                Query(
                    quantile(0.9, DELTA, labels, ["agent", "variant"]), "p90 {{agent}} {{variant}}"
                ),
            ],
            unit="percent",
        )

    b.row("Volume and alerts")
    b.timeseries(
        "Episodes scored/s",
        "Scored episodes per second by agent and variant (the sample behind the means).",
        [
            Query(
                rate(f"{SCORE}_count", f'dimension="overall", {FILTER}', ["agent", "variant"]),
                "{{agent}} {{variant}}",
            )
        ],
    )
    b.timeseries(
        "Regression alerts firing",
        "Windowed regression alerts firing, by agent, variant, dimension and severity.",
        [
            Query(
                "sum by (agent, variant, dimension, severity) "
                f"(evalstream_regression_alerts_firing{{{FILTER}}})",
                "{{agent}} {{variant}} {{dimension}} {{severity}}",
            )
        ],
    )
    b.timeseries(
        "Per-episode alerts by dimension",
        "Per-episode alert rules that fired, per second, by agent, variant, dimension and "
        "severity.",
        [
            Query(
                rate(
                    "evalstream_episode_alerts_total",
                    FILTER,
                    ["agent", "variant", "dimension", "severity"],
                ),
                "{{agent}} {{variant}} {{dimension}} {{severity}}",
                exemplars=True,
            )
        ],
        stacked=True,
    )
    return b
