"""The judge as the runtimes use it: `AnthropicJudge` reporting to the Prometheus metrics.

`make_judge(metrics)` returns None without an API key, so `llm.judge` assertions are `error`
(never `pass`) rather than the run failing to start. `judge_from(spec)` is the rule every
evaluating command follows: `--judge module:factory` when given, else `make_judge`
(with `--judge-batch`, the batch judge of `evalstream.connectors.anthropic_api.judge_batch`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from evalstream.assertions.errors import InputError
from evalstream.assertions.judge.budget import WINDOWS
from evalstream.connectors.anthropic_api.judge import AnthropicJudge, JudgeSettings
from evalstream.connectors.anthropic_api.judge_batch import BatchAnthropicJudge

if TYPE_CHECKING:
    from evalstream.assertions.judge.protocol import Judge
    from evalstream.assertions.wire.pricing import PricingTable
    from evalstream.stream.telemetry.metrics import PipelineMetrics


class PrometheusJudgeObserver:
    """Maps the judge's reports onto the `evalstream_judge_*` metrics (calls by outcome,
    spend, prompt-cache tokens and saving, latency, budget left and ceiling per window)."""

    OUTCOMES = ("ok", "error", "cached", "budget_exhausted")
    CACHE_KINDS = ("read", "write")

    def __init__(self, metrics: PipelineMetrics, settings: JudgeSettings | None = None) -> None:
        self.metrics = metrics
        for outcome in self.OUTCOMES:  # every series exists from the start (rate() works)
            metrics.judge_calls.labels(outcome=outcome)
        for kind in self.CACHE_KINDS:
            metrics.judge_cache_tokens.labels(kind=kind)
        if settings is not None:
            limits = settings.budget_limits()
            for window in WINDOWS:
                ceiling = limits.usd(window)
                if ceiling is not None:
                    metrics.judge_budget_ceiling.labels(window=window).set(ceiling)

    def judge_call(self, outcome: str, cost_usd: float, latency_s: float) -> None:
        self.metrics.judge_calls.labels(outcome=outcome).inc()
        if cost_usd:
            self.metrics.judge_spend.inc(cost_usd)
        if outcome in ("ok", "error"):
            self.metrics.judge_latency.observe(latency_s)

    def judge_cache(self, read_tokens: int, write_tokens: int, saving_usd: float) -> None:
        self.metrics.judge_cache_tokens.labels(kind="read").inc(read_tokens)
        self.metrics.judge_cache_tokens.labels(kind="write").inc(write_tokens)
        # A counter only goes up: a call that only wrote the cache adds its surcharge nowhere
        # here; the spend counter has it.
        if saving_usd > 0:
            self.metrics.judge_cache_saving.inc(saving_usd)

    def judge_budget(self, remaining_usd: Mapping[str, float]) -> None:
        for window, left in remaining_usd.items():
            self.metrics.judge_budget_remaining.labels(window=window).set(left)


def make_judge(
    metrics: PipelineMetrics | None = None,
    *,
    pricing: PricingTable | None = None,
    env: Mapping[str, str] | None = None,
    settings: JudgeSettings | None = None,
    batchable: bool = False,
    batch: bool = False,
    batch_state: str | None = None,
) -> AnthropicJudge | None:
    """The judge configured by the environment, or None when no API key is set. A
    `batchable` command (a run that ends: `check`, `eval`, `matrix`) asks its questions as
    one batch with `batch` (`--judge-batch`) or EVALSTREAM_JUDGE_BATCH; the others (the
    worker, `up`, which judge as episodes close) never do."""
    settings = settings or JudgeSettings.from_env(
        os.environ if env is None else env, batch=batch or None, batch_state=batch_state
    )
    if settings.api_key is None:
        return None
    observer = PrometheusJudgeObserver(metrics, settings) if metrics is not None else None
    kind = BatchAnthropicJudge if batchable and settings.batch else AnthropicJudge
    return kind(settings, pricing=pricing, observer=observer)


def judge_from(
    spec: str | None,
    metrics: PipelineMetrics | None = None,
    *,
    pricing: PricingTable | None = None,
    env: Mapping[str, str] | None = None,
    batchable: bool = False,
    batch: bool = False,
    batch_state: str | None = None,
) -> Judge | None:
    """The judge of `llm.judge`: `spec` (`module:factory` or `file.py:factory`, a callable
    returning an object with `async judge(request)`) when given, else the Anthropic judge
    the environment configures (ANTHROPIC_API_KEY), else None. A bad spec is an InputError."""
    if spec is None:
        return make_judge(
            metrics,
            pricing=pricing,
            env=env,
            batchable=batchable,
            batch=batch,
            batch_state=batch_state,
        )
    if batch:
        raise InputError(
            "--judge-batch batches the Anthropic judge's questions; it does not apply to "
            f"--judge {spec!r}: drop one of the two"
        )
    from evalstream.connectors.targets.python_callable import load_callable  # noqa: PLC0415 - only here

    try:
        factory = load_callable(spec)
    except InputError as exc:
        raise InputError(f"--judge: {exc}") from exc
    judge = factory()
    if not callable(getattr(judge, "judge", None)):
        raise InputError(
            f"--judge {spec!r} returned {type(judge).__name__}, which has no `judge(request)` "
            "method; the factory must return a Judge (see evalstream/assertions/judge/protocol.py)"
        )
    return judge  # type: ignore[no-any-return]  # checked: it has the protocol's method
