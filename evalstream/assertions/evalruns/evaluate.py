"""Evaluate one sample's signals with the engine, exactly as `evalstream check` would.

The signals go through the same `EpisodeAssembler` (dedupe, end signal, close reason) and the
same compiled plan (the dataset's `defaultAssertions` plus the case's assertions). Judgements
(`llm.judge`) come back pending; the caller asks its judge and resolves them.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalstream.assertions.evalruns.models import (
    AssertionRecord,
    CaseMetrics,
    ErrorKind,
    SampleResult,
    SampleStatus,
)
from evalstream.assertions.evaluation.assembly import ClosedEpisode, CloseRules, EpisodeAssembler
from evalstream.assertions.kinds.base import CompileContext
from evalstream.assertions.suite_format.suites import Suite, SuiteSet
from evalstream.assertions.wire.pricing import PricingTable, default_pricing
from evalstream.assertions.wire.signals import Signal

# Every signal of a sample is already in hand: no grace period, no inactivity close.
_RULES = CloseRules(grace_ms=0.0, inactivity_ms=float("inf"), max_duration_ms=None)


class CaseEvaluator:
    """Compiles the dataset once; evaluates any number of samples of its cases."""

    def __init__(self, suite: Suite, pricing: PricingTable | None = None) -> None:
        self.pricing = pricing or default_pricing()
        self.suite_set = SuiteSet([suite], CompileContext(self.pricing))

    def assemble(self, signals: Sequence[Signal]) -> ClosedEpisode:
        """Feed one episode's signals (in order) and close it; the plan is chosen by the
        `attrs.case_id` of the first signal, as for live traffic."""
        if not signals:
            raise ValueError("a sample needs at least one signal")
        assembler = EpisodeAssembler(
            self.suite_set.plan_for, _RULES, self.pricing, selection=self.suite_set
        )
        for sig in signals:
            assembler.feed(sig, sig.ts)
        assembler.flush()
        [closed] = assembler.drain_ready()
        return closed


def sample_from_closed(
    closed: ClosedEpisode,
    *,
    index: int,
    attempts: int,
    duration_ms: float,
    signals: Sequence[Signal] = (),
    notes: Sequence[str] = (),
) -> SampleResult:
    """The sample's verdict after every judgement was resolved."""
    result = closed.result()
    records = [AssertionRecord.of(a) for a in result.assertions]
    m = result.metrics
    metrics = CaseMetrics(
        latency_ms=m.latency_ms,
        input_tokens=m.input_tokens,
        output_tokens=m.output_tokens,
        total_tokens=m.total_tokens,
        cost=m.cost_usd,
        activations=m.activations,
        tool_calls=m.tool_calls,
        llm_calls=m.llm_calls,
        cost_complete=not m.unpriced_models,
    )
    status: SampleStatus
    error: str | None = None
    kind: ErrorKind | None = None
    if not records:
        status, kind = "error", "no_assertions"
        error = "no assertion applies to this case (it has none and the dataset has no defaults)"
    elif result.status == "passed":
        status = "passed"
    elif result.status == "failed":
        status = "failed"
    else:
        status, kind = "error", "evaluation"
        bad = next(a for a in records if a.verdict in {"error", "pending"})
        error = f"assertion {bad.index} ({bad.type}) could not decide: {bad.message}"
    return SampleResult(
        index=index,
        episode_id=result.episode_id,
        status=status,
        attempts=attempts,
        error=error,
        error_kind=kind,
        duration_ms=duration_ms,
        metrics=metrics,
        assertions=records,
        output=result.output,
        final_state=dict(closed.evaluation.facts.state),
        close_reason=result.close_reason,
        signals=[s.to_wire() for s in signals],
        notes=list(notes),
    )


def errored_sample(
    *,
    index: int,
    episode_id: str,
    attempts: int,
    kind: ErrorKind,
    message: str,
    duration_ms: float,
    signals: Sequence[Signal] = (),
    notes: Sequence[str] = (),
) -> SampleResult:
    """A sample whose target failed: no verdicts, counted as an error (never as a pass)."""
    return SampleResult(
        index=index,
        episode_id=episode_id,
        status="error",
        attempts=attempts,
        error=message,
        error_kind=kind,
        duration_ms=duration_ms,
        signals=[s.to_wire() for s in signals],
        notes=list(notes),
    )
