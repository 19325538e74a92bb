"""Public test helpers: build signals and evaluate assertions without any broker.

from evalstream.assertions.testing import SignalFactory, run_assertions
f = SignalFactory()
signals = [f("harness:start"), f("tool:call", {"name": "Edit"}), f("harness:end")]
[outcome] = run_assertions([{"type": "tool.called", "name": "Edit"}], signals)
assert outcome.verdict == "pass"
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evalstream.assertions.evaluation.engine import AssertionOutcome, Plan, PlannedAssertion
from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.reference import evaluate_all
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode, SyncJudge
from evalstream.assertions.evaluation.registry import parse_assertion
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.judge.protocol import NO_JUDGE
from evalstream.assertions.kinds.base import CompileContext
from evalstream.assertions.wire.pricing import PricingTable, default_pricing
from evalstream.assertions.wire.signals import Signal

JSON = Any


class SignalFactory:
    """Makes signals with sequential ids, seq numbers and timestamps (`step_ms` apart)."""

    def __init__(
        self, episode_id: str = "ep-1", start_ms: float = 1_700_000_000_000.0, step_ms: float = 10.0
    ) -> None:
        self.episode_id = episode_id
        self.next_ts = start_ms
        self.step_ms = step_ms
        self.count = 0

    def __call__(
        self,
        name: str,
        payload: JSON = None,
        *,
        agent: str | None = None,
        parent: str | Signal | None = None,
        attrs: dict[str, JSON] | None = None,
        id: str | None = None,
        ts: float | None = None,
    ) -> Signal:
        self.count += 1
        when = self.next_ts if ts is None else ts
        self.next_ts = when + self.step_ms
        return Signal(
            id=id or f"s{self.count}",
            episode_id=self.episode_id,
            name=name,
            ts=when,
            seq=self.count - 1,
            agent=agent,
            parent=parent.id if isinstance(parent, Signal) else parent,
            payload=payload,
            attrs=attrs,
        )


def parse_all(assertions: Iterable[Mapping[str, JSON] | AssertionSpec]) -> list[AssertionSpec]:
    return [a if isinstance(a, AssertionSpec) else parse_assertion(a) for a in assertions]


def run_assertions(
    assertions: Iterable[Mapping[str, JSON] | AssertionSpec],
    signals: Sequence[Signal],
    *,
    pricing: PricingTable | None = None,
    judge: SyncJudge | None = None,
    default_model: str | None = None,
) -> list[AssertionOutcome]:
    """Evaluate incrementally over `signals` (one episode) and close; judge is synchronous."""
    pricing = pricing or default_pricing()
    specs = parse_all(assertions)
    plan = Plan([PlannedAssertion(s, "test", "case") for s in specs], CompileContext(pricing))
    evaluation = plan.start(EpisodeFacts(pricing, default_model))
    for sig in signals:
        evaluation.feed(sig)
    for pending in evaluation.finish():
        outcome: Outcome = judge(pending.request) if judge else NO_JUDGE
        evaluation.resolve(pending.leaf, outcome)
    return evaluation.results()


def run_reference(
    assertions: Iterable[Mapping[str, JSON] | AssertionSpec],
    signals: Sequence[Signal],
    *,
    pricing: PricingTable | None = None,
    judge: SyncJudge | None = None,
    default_model: str | None = None,
) -> list[Outcome]:
    """The reference evaluator over the same input, for comparison."""
    episode = ReferenceEpisode(list(signals), pricing or default_pricing(), default_model, judge)
    return evaluate_all(parse_all(assertions), episode)


def evaluate_agreeing(
    assertion: Mapping[str, JSON] | AssertionSpec,
    signals: Sequence[Signal],
    *,
    pricing: PricingTable | None = None,
    judge: SyncJudge | None = None,
    default_model: str | None = None,
) -> AssertionOutcome:
    """The engine's outcome for one assertion, after checking the reference agrees on it."""
    options: dict[str, Any] = {"pricing": pricing, "judge": judge, "default_model": default_model}
    [outcome] = run_assertions([assertion], signals, **options)
    [reference] = run_reference([assertion], signals, **options)
    if outcome.verdict != reference.verdict:
        raise AssertionError(
            f"engine says {outcome.verdict} ({outcome.message}), "
            f"reference says {reference.verdict} ({reference.message})"
        )
    return outcome
