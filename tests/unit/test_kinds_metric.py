"""metric.latency / cost / tokens (max and min) and metric.activations.

Metrics come from the signals themselves: latency from `harness:end.durationMs` or the
timestamp span, usage and cost from `provider:end`, activations from `agent:activated`.
Every case also runs the reference evaluator and requires the same verdict; signal ids are
s1, s2, ... in order, and `decided_at=None` means decided when the episode closed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from evalstream.assertions.evaluation.engine import AssertionOutcome
from evalstream.assertions.testing import SignalFactory, evaluate_agreeing
from evalstream.assertions.wire.pricing import ModelPrice, PricingTable
from evalstream.assertions.wire.signals import Signal

JSON = Any
Build = Callable[[SignalFactory], list[Signal]]


def evaluate(
    spec: dict[str, JSON],
    build: Build,
    *,
    pricing: PricingTable | None = None,
    default_model: str | None = None,
) -> AssertionOutcome:
    signals = build(SignalFactory(start_ms=0.0, step_ms=10.0))
    return evaluate_agreeing(spec, signals, pricing=pricing, default_model=default_model)


def check(spec: dict[str, JSON], build: Build, verdict: str, decided_at: str | None) -> None:
    outcome = evaluate(spec, build)
    assert outcome.verdict == verdict, outcome.message
    assert outcome.decided_at == decided_at, outcome.message


def usage(inp: int, out: int, total: int | None = None) -> dict[str, JSON]:
    u: dict[str, JSON] = {"inputTokens": inp, "outputTokens": out}
    if total is not None:
        u["totalTokens"] = total
    return u


def call_end(
    inp: int = 0, out: int = 0, *, cost: float | None = None, model: str | None = None
) -> dict[str, JSON]:
    """A DESIGN §2 `provider:end` payload."""
    payload: dict[str, JSON] = {"output": {"content": "ok", "usage": usage(inp, out)}}
    if cost is not None:
        payload["costUsd"] = cost
    if model is not None:
        payload["model"] = model
    return payload


# --- metric.latency --------------------------------------------------------------------------


def with_duration(duration: float) -> Build:
    """Timestamps span 20 ms, but harness:end reports `duration`."""
    return lambda f: [
        f("harness:start"),
        f("tool:call"),
        f("harness:end", {"durationMs": duration}),
    ]


def spanning(*stamps: float) -> Build:
    """No durationMs: one signal at each timestamp."""
    return lambda f: [f("step", ts=t) for t in stamps]


LATENCY_CASES = [
    pytest.param("max", 1000, with_duration(500), "pass", id="duration-under-max"),
    pytest.param("max", 500, with_duration(500), "pass", id="duration-equal-max"),
    pytest.param("max", 400, with_duration(500), "fail", id="duration-over-max"),
    pytest.param("min", 400, with_duration(500), "pass", id="duration-over-min"),
    pytest.param("min", 600, with_duration(500), "fail", id="duration-under-min"),
    pytest.param("max", 100, with_duration(50), "pass", id="duration-wins-over-a-longer-span"),
    pytest.param("min", 10, with_duration(0), "fail", id="duration-wins-over-a-span-when-zero"),
    pytest.param("max", 1000, spanning(0, 300, 1200), "fail", id="span-over-max"),
    pytest.param("min", 1200, spanning(0, 300, 1200), "pass", id="span-equal-min"),
    pytest.param("max", 1100, spanning(100, 50, 1150, 400), "pass", id="span-is-max-minus-min"),
    pytest.param("min", 1100, spanning(100, 50, 1150, 400), "pass", id="span-out-of-order"),
    pytest.param(
        "max",
        10,
        lambda f: [f("harness:start", ts=0), f("harness:end", {"output": "x"}, ts=5000)],
        "fail",
        id="harness-end-without-duration-uses-span",
    ),
    pytest.param(
        "max",
        10,
        lambda f: [f("harness:end", {"durationMs": "5"}, ts=0), f("x", ts=500)],
        "fail",
        id="non-numeric-duration-ignored",
    ),
    pytest.param("max", 0, lambda f: [], "pass", id="empty-episode-is-zero"),
]


@pytest.mark.parametrize(("bound", "value", "build", "verdict"), LATENCY_CASES)
def test_metric_latency(bound: str, value: float, build: Build, verdict: str) -> None:
    # latency can only be known at close: a later harness:end may still report durationMs
    check({"type": f"metric.latency.{bound}", "value": value}, build, verdict, None)


# --- metric.cost -----------------------------------------------------------------------------


def reported(*costs: float) -> Build:
    """Calls reporting costUsd; provider:end ids are s3, s5, s7, ..."""

    def build(f: SignalFactory) -> list[Signal]:
        out = [f("harness:start")]
        for c in costs:
            out += [f("provider:start", {"model": "gpt-4o"}), f("provider:end", call_end(cost=c))]
        return [*out, f("harness:end")]

    return build


# claude-sonnet-4-5 costs $3 / $15 per million input / output tokens: 1000 + 1000 -> $0.018
def sonnet_call(f: SignalFactory) -> list[Signal]:
    return [
        f("provider:start", {"model": "claude-sonnet-4-5-20250929"}, agent="coder"),
        f("provider:end", call_end(1000, 1000), agent="coder"),
        f("harness:end"),
    ]


COST_CASES = [
    pytest.param("max", 0.05, reported(0.01, 0.02), "pass", None, id="reported-under-max"),
    pytest.param("max", 0.025, reported(0.01, 0.02, 0.0), "fail", "s5", id="over-max-at-once"),
    pytest.param("min", 0.025, reported(0.01, 0.02, 0.5), "pass", "s5", id="min-reached-at-once"),
    pytest.param("min", 0.05, reported(0.01, 0.02), "fail", None, id="reported-under-min"),
    pytest.param("max", 0.0, reported(), "pass", None, id="no-calls-cost-nothing"),
    pytest.param("min", 0.01, reported(), "fail", None, id="no-calls-under-min"),
    pytest.param("max", 0.01, reported(-5.0, 0.01), "pass", None, id="negative-cost-clamped"),
    pytest.param("max", 0.02, sonnet_call, "pass", None, id="priced-from-usage-under"),
    pytest.param("max", 0.017, sonnet_call, "fail", "s2", id="priced-from-usage-over"),
    pytest.param("min", 0.018, sonnet_call, "pass", "s2", id="priced-from-usage-min"),
    pytest.param(
        "max",
        0.001,
        lambda f: [
            f("provider:start", {"model": "claude-sonnet-4-5"}),
            f("provider:end", {**call_end(1000, 1000), "costUsd": 0}),
        ],
        "pass",
        None,
        id="reported-cost-wins-over-usage",
    ),
    pytest.param(
        "max",
        0.001,
        lambda f: [f("provider:start", {"model": "gpt-4o"}), f("provider:end", {"output": "x"})],
        "pass",
        None,
        id="call-without-usage-costs-nothing",
    ),
    pytest.param(
        "min",
        0.018,
        lambda f: [f("provider:end", call_end(1000, 1000, model="claude-sonnet-4-5"))],
        "pass",
        "s1",
        id="model-on-provider-end",
    ),
    pytest.param(
        "max",
        0.001,
        lambda f: [
            f("provider:start", {"model": "anthropic/claude-sonnet-4-5"}),
            f("provider:end", call_end(1000, 1000)),
        ],
        "fail",
        "s2",
        id="provider-prefix-ignored",
    ),
]


@pytest.mark.parametrize(("bound", "value", "build", "verdict", "decided_at"), COST_CASES)
def test_metric_cost(
    bound: str, value: float, build: Build, verdict: str, decided_at: str | None
) -> None:
    check({"type": f"metric.cost.{bound}", "value": value}, build, verdict, decided_at)


# Two agents interleave their calls; each provider:end is priced with the model of the
# preceding provider:start of the same agent, not simply the latest one.
# opus-4-1: $15 / $75 per million -> 1000 + 1000 tokens = $0.09; claude-3-haiku -> $0.0015.
def interleaved(f: SignalFactory) -> list[Signal]:
    return [
        f("provider:start", {"model": "claude-opus-4-1"}, agent="planner"),  # s1
        f("provider:start", {"model": "claude-3-haiku"}, agent="coder"),  # s2
        f("provider:end", call_end(1000, 1000), agent="planner"),  # s3: opus
        f("provider:end", call_end(1000, 1000), agent="coder"),  # s4: haiku
    ]


@pytest.mark.parametrize(
    ("bound", "value", "verdict", "decided_at"),
    [
        pytest.param("min", 0.09, "pass", "s3", id="first-call-priced-as-opus"),
        pytest.param("max", 0.0915, "pass", None, id="second-call-priced-as-haiku"),
        pytest.param("max", 0.0914, "fail", "s4", id="total-just-over"),
    ],
)
def test_metric_cost_uses_the_model_of_the_same_agent(
    bound: str, value: float, verdict: str, decided_at: str | None
) -> None:
    check({"type": f"metric.cost.{bound}", "value": value}, interleaved, verdict, decided_at)


def test_metric_cost_falls_back_to_the_latest_model_of_any_agent() -> None:
    def build(f: SignalFactory) -> list[Signal]:
        return [
            f("provider:start", {"model": "claude-opus-4-1"}, agent="planner"),
            f("provider:end", call_end(1000, 1000), agent="coder"),
        ]

    check({"type": "metric.cost.min", "value": 0.09}, build, "pass", "s2")


def unpriced(f: SignalFactory) -> list[Signal]:
    return [
        f("harness:start"),
        f("provider:start", {"model": "mystery-model-1"}),
        f("provider:end", call_end(1000, 1000)),
        f("harness:end"),
    ]


@pytest.mark.parametrize("bound", ["max", "min"])
def test_metric_cost_with_an_unpriced_model_is_an_error(bound: str) -> None:
    outcome = evaluate({"type": f"metric.cost.{bound}", "value": 1.0}, unpriced)
    assert (outcome.verdict, outcome.decided_at) == ("error", None)
    assert "mystery-model-1" in outcome.message


def test_metric_cost_without_any_model_is_an_error() -> None:
    def build(f: SignalFactory) -> list[Signal]:
        return [f("provider:end", call_end(10, 10))]

    outcome = evaluate({"type": "metric.cost.max", "value": 1.0}, build)
    assert outcome.verdict == "error"
    assert "<no model>" in outcome.message


@pytest.mark.parametrize(
    ("bound", "value", "verdict", "decided_at"),
    [
        pytest.param("max", 1.0, "fail", "s2", id="budget-already-exceeded-fails"),
        pytest.param("min", 1.0, "pass", "s2", id="minimum-already-reached-passes"),
        pytest.param("max", 5.0, "error", None, id="undecidable-is-error"),
        pytest.param("min", 5.0, "error", None, id="undecidable-min-is-error"),
    ],
)
def test_metric_cost_unpriced_is_error_unless_already_decided(
    bound: str, value: float, verdict: str, decided_at: str | None
) -> None:
    def build(f: SignalFactory) -> list[Signal]:
        return [
            f("provider:start", {"model": "mystery-model-1"}),
            f("provider:end", call_end(cost=2.0)),  # reported: $2 known
            f("provider:end", call_end(1000, 1000)),  # unpriced
        ]

    check({"type": f"metric.cost.{bound}", "value": value}, build, verdict, decided_at)


def test_metric_cost_default_model_prices_calls_without_a_provider_start() -> None:
    def build(f: SignalFactory) -> list[Signal]:
        return [f("provider:end", call_end(1000, 1000))]

    spec = {"type": "metric.cost.min", "value": 0.018}
    outcome = evaluate(spec, build, default_model="claude-sonnet-4-5")
    assert (outcome.verdict, outcome.decided_at) == ("pass", "s1")
    assert evaluate(spec, build, default_model="no-such-model").verdict == "error"


def test_metric_cost_with_a_custom_pricing_table() -> None:
    table = PricingTable({"house-model": ModelPrice(input=1_000.0, output=0.0)})

    def build(f: SignalFactory) -> list[Signal]:
        return [f("provider:start", {"model": "house-model-v2"}), f("provider:end", call_end(10))]

    spec = {"type": "metric.cost.max", "value": 0.009}
    outcome = evaluate(spec, build, pricing=table)
    assert (outcome.verdict, outcome.decided_at) == ("fail", "s2")  # 10 * 1000 / 1e6 = $0.01
    assert evaluate({**spec, "value": 0.01}, build, pricing=table).verdict == "pass"


# --- metric.tokens ---------------------------------------------------------------------------


def calls(*usages: dict[str, JSON]) -> Build:
    """One provider:end per usage; their ids are s2, s3, ..."""
    return lambda f: [
        f("harness:start"),
        *(f("provider:end", {"output": {"content": "x", "usage": u}}) for u in usages),
        f("harness:end"),
    ]


TWO_CALLS = calls(usage(100, 20), usage(300, 40))  # input 400, output 60, total 460

TOKENS_CASES = [
    pytest.param("max total", 460, TWO_CALLS, "pass", None, id="total-equal-max"),
    pytest.param("max total", 459, TWO_CALLS, "fail", "s3", id="total-over-max-at-once"),
    pytest.param("max input", 99, TWO_CALLS, "fail", "s2", id="input-over-at-first-call"),
    pytest.param("max output", 60, TWO_CALLS, "pass", None, id="output-under-max"),
    pytest.param("min input", 400, TWO_CALLS, "pass", "s3", id="input-min-reached"),
    pytest.param("min output", 61, TWO_CALLS, "fail", None, id="output-under-min"),
    pytest.param("min total", 100, TWO_CALLS, "pass", "s2", id="total-min-at-first-call"),
    pytest.param(
        "max total",
        1000,
        calls(usage(100, 20, total=2000)),
        "fail",
        "s2",
        id="reported-total-wins-over-the-sum",
    ),
    pytest.param(
        "min input",
        100,
        calls(usage(-100, 0), usage(150, 0)),
        "pass",
        "s3",
        id="negative-counts-clamp-to-zero",
    ),
    pytest.param(
        "min total",
        30,
        lambda f: [f("provider:end", {"usage": {"prompt_tokens": 10, "completion_tokens": 20}})],
        "pass",
        "s1",
        id="signal-native-usage-and-provider-spelling",
    ),
    pytest.param(
        "max total",
        0,
        lambda f: [f("provider:end", {"output": "no usage"}), f("text:complete", {"x": 1})],
        "pass",
        None,
        id="no-usage-is-zero",
    ),
]


@pytest.mark.parametrize(
    ("bound_and_field", "value", "build", "verdict", "decided_at"), TOKENS_CASES
)
def test_metric_tokens(
    bound_and_field: str, value: float, build: Build, verdict: str, decided_at: str | None
) -> None:
    bound, field = bound_and_field.split()
    spec = {"type": f"metric.tokens.{bound}", "value": value, "field": field}
    check(spec, build, verdict, decided_at)


def test_metric_tokens_field_defaults_to_total() -> None:
    check({"type": "metric.tokens.max", "value": 459}, TWO_CALLS, "fail", "s3")


# --- metric.activations ----------------------------------------------------------------------


def three_activations(f: SignalFactory) -> list[Signal]:
    return [
        f("harness:start"),
        f("agent:activated", {"agent": "planner"}),  # s2
        f("tool:call"),
        f("agent:activated", {"agent": "coder"}),  # s4
        f("agent:activated", {"agent": "planner"}),  # s5
        f("agent:skipped", {"agent": "fixer"}),
        f("harness:end"),
    ]


ACTIVATIONS_CASES = [
    pytest.param({"exact": 3}, "pass", None, id="exact-met-counts-every-agent"),
    pytest.param({"exact": 2}, "fail", "s5", id="exact-exceeded-at-once"),
    pytest.param({"exact": 4}, "fail", None, id="exact-short"),
    pytest.param({"min": 2}, "pass", "s4", id="min-reached-at-once"),
    pytest.param({"min": 4}, "fail", None, id="min-short"),
    pytest.param({"max": 3}, "pass", None, id="max-met"),
    pytest.param({"max": 1}, "fail", "s4", id="max-exceeded-at-once"),
    pytest.param({"min": 1, "max": 3}, "pass", None, id="range"),
]


@pytest.mark.parametrize(("bounds", "verdict", "decided_at"), ACTIVATIONS_CASES)
def test_metric_activations(bounds: dict[str, JSON], verdict: str, decided_at: str | None) -> None:
    check({"type": "metric.activations", **bounds}, three_activations, verdict, decided_at)
