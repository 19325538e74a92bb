"""metric.latency / cost / tokens (max and min) and metric.activations, from the signals."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.kinds.base import (
    AssertionType,
    CountRule,
    Interest,
    Leaf,
    count_rule_problems,
    leaf_builder,
)
from evalstream.assertions.wire.signals import Signal


class _Bound(AssertionSpec):
    value: float = Field(ge=0)

    def describe(self) -> str:
        return f"{self.type} {self.value:g}"

    @property
    def is_max(self) -> bool:
        return self.type.endswith(".max")


class MetricLatency(_Bound):
    """Episode latency in ms: `harness:end.durationMs`, else last minus first timestamp."""

    type: Literal["metric.latency.max", "metric.latency.min"]


class MetricCost(_Bound):
    """Episode cost in USD: reported `costUsd`, else usage priced by the pricing table."""

    type: Literal["metric.cost.max", "metric.cost.min"]


class MetricTokens(_Bound):
    """Episode tokens from `provider:end` usage."""

    type: Literal["metric.tokens.max", "metric.tokens.min"]
    field: Literal["input", "output", "total"] = "total"


class MetricActivations(AssertionSpec):
    """Number of `agent:activated` signals."""

    type: Literal["metric.activations"] = "metric.activations"
    min: int | None = None
    max: int | None = None
    exact: int | None = None

    @model_validator(mode="after")
    def _bounds(self) -> MetricActivations:
        if self.min is None and self.max is None and self.exact is None:
            raise ValueError("metric.activations needs `min`, `max` or `exact`")
        problem = count_rule_problems(self.min, self.max, self.exact)
        if problem:
            raise ValueError(problem)
        return self


def compare(spec: _Bound, measured: float, unit: str) -> Outcome:
    ok = measured <= spec.value if spec.is_max else measured >= spec.value
    word = "max" if spec.is_max else "min"
    text = f"{measured:g}{unit} ({word} {spec.value:g}{unit})"
    return Outcome.passed(text) if ok else Outcome.failed(text)


def _monotone_early(spec: _Bound, measured: float, unit: str) -> Outcome | None:
    """For sums that only grow: a max is broken, or a min reached, for good."""
    if spec.is_max and measured > spec.value:
        return Outcome.failed(f"{measured:g}{unit} already over max {spec.value:g}{unit}")
    if not spec.is_max and measured >= spec.value:
        return Outcome.passed(f"{measured:g}{unit} reached min {spec.value:g}{unit}")
    return None


def _cost_final(spec: MetricCost, known: float, unpriced: list[str]) -> Outcome:
    early = _monotone_early(spec, known, " USD")
    if early is not None:
        return early
    if unpriced:
        return Outcome.errored(
            f"cost unknown: no price for {', '.join(unpriced)}; add the model to a pricing "
            "table (--pricing FILE) or report costUsd on provider:end"
        )
    return compare(spec, known, " USD")


class LatencyLeaf(Leaf[MetricLatency]):
    def __init__(self, spec: MetricLatency) -> None:
        super().__init__(spec, Interest.close_only())

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return compare(self.spec, facts.latency_ms(), " ms")


class CostLeaf(Leaf[MetricCost]):
    def __init__(self, spec: MetricCost) -> None:
        super().__init__(spec, Interest.names("provider:end"))

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        return _monotone_early(self.spec, facts.cost_usd, " USD")

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return _cost_final(self.spec, facts.cost_usd, facts.unpriced_models)


class TokensLeaf(Leaf[MetricTokens]):
    def __init__(self, spec: MetricTokens) -> None:
        super().__init__(spec, Interest.names("provider:end"))
        self.attr = f"{spec.field}_tokens"

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        return _monotone_early(self.spec, getattr(facts, self.attr), " tokens")

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return compare(self.spec, getattr(facts, self.attr), " tokens")


class ActivationsLeaf(Leaf[MetricActivations]):
    def __init__(self, spec: MetricActivations) -> None:
        super().__init__(spec, Interest.names("agent:activated"))
        self.rule = CountRule(spec.min, spec.max, spec.exact)

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        return self.rule.early(facts.activations, "activations")

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return self.rule.final(facts.activations, "activations")


def ref_latency(spec: MetricLatency, ep: ReferenceEpisode) -> Outcome:
    return compare(spec, ep.latency_ms(), " ms")


def ref_cost(spec: MetricCost, ep: ReferenceEpisode) -> Outcome:
    known, unpriced = ep.cost()
    return _cost_final(spec, known, unpriced)


def ref_tokens(spec: MetricTokens, ep: ReferenceEpisode) -> Outcome:
    return compare(spec, ep.tokens(spec.field), " tokens")


def ref_activations(spec: MetricActivations, ep: ReferenceEpisode) -> Outcome:
    n = len(ep.named("agent:activated"))
    return CountRule(spec.min, spec.max, spec.exact).final(n, "activations")


TYPES = [
    *(
        AssertionType(name, MetricLatency, leaf_builder(LatencyLeaf), ref_latency, "metric")
        for name in ("metric.latency.max", "metric.latency.min")
    ),
    *(
        AssertionType(name, MetricCost, leaf_builder(CostLeaf), ref_cost, "metric")
        for name in ("metric.cost.max", "metric.cost.min")
    ),
    *(
        AssertionType(name, MetricTokens, leaf_builder(TokensLeaf), ref_tokens, "metric")
        for name in ("metric.tokens.max", "metric.tokens.min")
    ),
    AssertionType(
        "metric.activations",
        MetricActivations,
        leaf_builder(ActivationsLeaf),
        ref_activations,
        "metric",
    ),
]
