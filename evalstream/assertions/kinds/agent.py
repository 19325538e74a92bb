"""agent.activated / completed / causedBy / emitted / skipped."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.matchers import compile_expected
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.kinds.base import (
    AssertionType,
    Box,
    CountBounds,
    CountRule,
    Interest,
    Leaf,
    leaf_builder,
)
from evalstream.assertions.wire.patterns import compile_pattern
from evalstream.assertions.wire.signals import Signal

JSON = Any
ACTIVATED = "agent:activated"
# Causal history kept for agent.causedBy is bounded; beyond it the verdict is `error`.
MAX_CAUSAL_IDS = 100_000


def activated_agent(sig: Signal) -> str | None:
    """Which agent an `agent:activated` / `agent:skipped` signal is about."""
    agent = sig.payload_get("agent")
    return agent if isinstance(agent, str) else sig.agent


def emitter(sig: Signal) -> str | None:
    return sig.attributed_agent()


def blames(sig: Signal, agent_id: str) -> bool:
    return sig.agent == agent_id or sig.payload_get("agent") == agent_id


class _AgentSpec(AssertionSpec):
    agent_id: str = Field(alias="agentId", min_length=1)

    def describe(self) -> str:
        return f"{self.type} {self.agent_id}"


class AgentActivated(CountBounds, _AgentSpec):
    """The agent was activated `count` times (default: at least once), or within min/max."""

    type: Literal["agent.activated"] = "agent.activated"


class AgentCompleted(_AgentSpec):
    """Activated at least once and no `agent:error` / `provider:error` attributed to it."""

    type: Literal["agent.completed"] = "agent.completed"


class AgentCausedBy(_AgentSpec):
    """An activation of the agent has a cause (parent signal) matching `triggerPattern`."""

    type: Literal["agent.causedBy"] = "agent.causedBy"
    trigger_pattern: str = Field(alias="triggerPattern", min_length=1)
    transitive: bool = Field(False, description="Accept any ancestor, not only the parent.")


class AgentEmitted(_AgentSpec):
    """The agent emitted a signal matching `signal` (`source.agent`, else `payload.agent`)."""

    type: Literal["agent.emitted"] = "agent.emitted"
    signal: str = Field(min_length=1)


class AgentSkipped(_AgentSpec):
    """An `agent:skipped` for the agent occurred (with `reason`, when given)."""

    type: Literal["agent.skipped"] = "agent.skipped"
    reason: JSON = None

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: JSON) -> JSON:
        if value is not None:
            compile_expected(value, "reason")
        return value


# --- incremental ---------------------------------------------------------------------------


class ActivatedLeaf(Leaf[AgentActivated]):
    def __init__(self, spec: AgentActivated) -> None:
        super().__init__(spec, Interest.names(ACTIVATED))
        self.rule = spec.count_rule()
        self.what = f"activations of {spec.agent_id}"

    def initial(self) -> Box:
        return Box(0)

    def feed(self, state: Box, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if activated_agent(sig) == self.spec.agent_id:
            state.value += 1
            return self.rule.early(state.value, self.what)
        return None

    def finish(self, state: Box, facts: EpisodeFacts) -> Outcome:
        return self.rule.final(state.value, self.what)


class CompletedLeaf(Leaf[AgentCompleted]):
    def __init__(self, spec: AgentCompleted) -> None:
        super().__init__(spec, Interest.names(ACTIVATED, "agent:error", "provider:error"))

    def initial(self) -> Box:
        return Box(False)

    def feed(self, state: Box, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        agent = self.spec.agent_id
        if sig.name == ACTIVATED:
            if activated_agent(sig) == agent:
                state.value = True
            return None
        if blames(sig, agent):
            return Outcome.failed(f"{sig.name} ({sig.id}) attributed to {agent}")
        return None

    def finish(self, state: Box, facts: EpisodeFacts) -> Outcome:
        if state.value:
            return Outcome.passed(f"{self.spec.agent_id} activated with no error")
        return Outcome.failed(f"{self.spec.agent_id} was never activated")


class CausedByLeaf(Leaf[AgentCausedBy]):
    """Keeps the ids of earlier signals that can be a cause (those matching the trigger, or in
    transitive mode their descendants). Causes precede effects: a link to a later or unknown
    signal is dangling."""

    def __init__(self, spec: AgentCausedBy) -> None:
        interest = (
            Interest.all_except()
            if spec.transitive
            else Interest.names(spec.trigger_pattern, ACTIVATED)
        )
        super().__init__(spec, interest)
        self.trigger = compile_pattern(spec.trigger_pattern)

    def initial(self) -> set[str]:
        return set()

    def feed(self, state: set[str], sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        spec = self.spec
        parent = sig.parent
        if sig.name == ACTIVATED and activated_agent(sig) == spec.agent_id:
            if parent is not None:
                if parent in state:
                    return Outcome.passed(f"{sig.id} caused by {parent} ({spec.trigger_pattern})")
            else:
                trigger = sig.payload_get("trigger")
                if isinstance(trigger, str) and self.trigger.matches(trigger):
                    return Outcome.passed(f"{sig.id} triggered by {trigger}")
        if self.trigger.matches(sig.name) or (
            spec.transitive and parent is not None and parent in state
        ):
            if len(state) >= MAX_CAUSAL_IDS:
                return Outcome.errored(
                    f"causal history exceeded {MAX_CAUSAL_IDS} signal ids; cannot decide"
                )
            state.add(sig.id)
        return None

    def finish(self, state: set[str], facts: EpisodeFacts) -> Outcome:
        how = "any ancestor" if self.spec.transitive else "a parent"
        return Outcome.failed(
            f"no activation of {self.spec.agent_id} has {how} matching {self.spec.trigger_pattern}"
        )


class EmittedLeaf(Leaf[AgentEmitted]):
    def __init__(self, spec: AgentEmitted) -> None:
        super().__init__(spec, Interest.names(spec.signal))

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if emitter(sig) == self.spec.agent_id:
            return Outcome.passed(f"{self.spec.agent_id} emitted {sig.name} ({sig.id})")
        return None

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return Outcome.failed(f"{self.spec.agent_id} never emitted {self.spec.signal}")


class SkippedLeaf(Leaf[AgentSkipped]):
    def __init__(self, spec: AgentSkipped) -> None:
        super().__init__(spec, Interest.names("agent:skipped"))
        self.reason = None if spec.reason is None else compile_expected(spec.reason)

    def matches(self, sig: Signal) -> bool:
        if activated_agent(sig) != self.spec.agent_id:
            return False
        return self.reason is None or self.reason(sig.payload_get("reason"))

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if self.matches(sig):
            return Outcome.passed(f"{self.spec.agent_id} skipped ({sig.id})")
        return None

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        why = "" if self.spec.reason is None else f" with reason {self.spec.reason!r}"
        return Outcome.failed(f"{self.spec.agent_id} was never skipped{why}")


# --- reference -----------------------------------------------------------------------------


def _activations(ep: ReferenceEpisode, agent_id: str) -> list[int]:
    return [
        i
        for i, s in enumerate(ep.signals)
        if s.name == ACTIVATED and activated_agent(s) == agent_id
    ]


def ref_activated(spec: AgentActivated, ep: ReferenceEpisode) -> Outcome:
    n = len(_activations(ep, spec.agent_id))
    return CountRule.of(spec.min, spec.max, spec.count, default_min=1).final(n, "activations")


def ref_completed(spec: AgentCompleted, ep: ReferenceEpisode) -> Outcome:
    for sig in ep.signals:
        if sig.name in ("agent:error", "provider:error") and blames(sig, spec.agent_id):
            return Outcome.failed("error attributed")
    if _activations(ep, spec.agent_id):
        return Outcome.passed("completed")
    return Outcome.failed("never activated")


def ref_caused_by(spec: AgentCausedBy, ep: ReferenceEpisode) -> Outcome:
    trigger = compile_pattern(spec.trigger_pattern)
    position = {s.id: i for i, s in enumerate(ep.signals)}
    for i in _activations(ep, spec.agent_id):
        act = ep.signals[i]
        if act.parent is None:
            t = act.payload_get("trigger")
            if isinstance(t, str) and trigger.matches(t):
                return Outcome.passed("payload.trigger")
            continue
        child_index = i
        parent_id: str | None = act.parent
        while parent_id is not None:
            j = position.get(parent_id)
            if j is None or j >= child_index:
                break  # dangling: causes must precede their effects
            if trigger.matches(ep.signals[j].name):
                return Outcome.passed("cause found")
            if not spec.transitive:
                break
            child_index, parent_id = j, ep.signals[j].parent
    return Outcome.failed("no cause")


def ref_emitted(spec: AgentEmitted, ep: ReferenceEpisode) -> Outcome:
    pattern = compile_pattern(spec.signal)
    if any(pattern.matches(s.name) and emitter(s) == spec.agent_id for s in ep.signals):
        return Outcome.passed("emitted")
    return Outcome.failed("not emitted")


def ref_skipped(spec: AgentSkipped, ep: ReferenceEpisode) -> Outcome:
    leaf = SkippedLeaf(spec)
    if any(s.name == "agent:skipped" and leaf.matches(s) for s in ep.signals):
        return Outcome.passed("skipped")
    return Outcome.failed("not skipped")


TYPES = [
    AssertionType(
        "agent.activated", AgentActivated, leaf_builder(ActivatedLeaf), ref_activated, "agent"
    ),
    AssertionType(
        "agent.completed", AgentCompleted, leaf_builder(CompletedLeaf), ref_completed, "agent"
    ),
    AssertionType(
        "agent.causedBy", AgentCausedBy, leaf_builder(CausedByLeaf), ref_caused_by, "agent"
    ),
    AssertionType("agent.emitted", AgentEmitted, leaf_builder(EmittedLeaf), ref_emitted, "agent"),
    AssertionType("agent.skipped", AgentSkipped, leaf_builder(SkippedLeaf), ref_skipped, "agent"),
]
