"""The judge as the runtimes use it: `AnthropicJudge` reporting to the Prometheus metrics.

`make_judge(metrics)` returns None without an API key, so `llm.judge` assertions are `error`
(never `pass`) rather than the run failing to start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from assertions.pricing import PricingTable
from connectors.anthropic_judge import AnthropicJudge, JudgeSettings
from stream.metrics import PipelineMetrics


class PrometheusJudgeObserver:
    """Maps judge calls onto `evalstream_judge_calls{outcome}`, `_cost_usd` and `_latency`."""

    OUTCOMES = ("ok", "error", "cached")

    def __init__(self, metrics: PipelineMetrics) -> None:
        self.metrics = metrics
        for outcome in self.OUTCOMES:  # every series exists from the start (rate() works)
            metrics.judge_calls.labels(outcome=outcome)

    def judge_call(self, outcome: str, cost_usd: float, latency_s: float) -> None:
        self.metrics.judge_calls.labels(outcome=outcome).inc()
        if cost_usd:
            self.metrics.judge_cost.inc(cost_usd)
        if outcome != "cached":
            self.metrics.judge_latency.observe(latency_s)


def make_judge(
    metrics: PipelineMetrics | None = None,
    *,
    pricing: PricingTable | None = None,
    env: Mapping[str, str] | None = None,
    settings: JudgeSettings | None = None,
) -> AnthropicJudge | None:
    """The judge configured by the environment, or None when no API key is set."""
    settings = settings or JudgeSettings.from_env(os.environ if env is None else env)
    if settings.api_key is None:
        return None
    observer = PrometheusJudgeObserver(metrics) if metrics is not None else None
    return AnthropicJudge(settings, pricing=pricing, observer=observer)
