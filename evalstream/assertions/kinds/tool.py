"""tool.called / notCalled / calledWith / sequence, over `tool:call` {id, name, input}.

Tool names are patterns too (`mcp__github__*`); without `*` they compare literally.
"""

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
from evalstream.assertions.wire.patterns import Pattern, compile_pattern
from evalstream.assertions.wire.signals import Signal

JSON = Any
TOOL_CALL = "tool:call"


def tool_name(sig: Signal) -> str:
    name = sig.payload_get("name")
    return name if isinstance(name, str) else ""


def tool_args(sig: Signal) -> JSON:
    payload = sig.payload
    if not isinstance(payload, dict):
        return None
    for key in ("input", "args", "arguments"):
        if key in payload:
            return payload[key]
    return None


class _ToolSpec(AssertionSpec):
    name: str = Field(min_length=1)

    def describe(self) -> str:
        return f"{self.type} {self.name}"


class ToolCalled(CountBounds, _ToolSpec):
    """The tool was called `count` times (default: at least once), or within min/max."""

    type: Literal["tool.called"] = "tool.called"


class ToolNotCalled(_ToolSpec):
    """The tool was never called."""

    type: Literal["tool.notCalled"] = "tool.notCalled"


class ToolCalledWith(_ToolSpec):
    """Some call of the tool has input partially matching `args`."""

    type: Literal["tool.calledWith"] = "tool.calledWith"
    args: dict[str, JSON]

    @field_validator("args")
    @classmethod
    def _args(cls, value: dict[str, JSON]) -> dict[str, JSON]:
        compile_expected(value, "args")
        return value


class ToolSequence(AssertionSpec):
    """The tools were called in this order (an in-order subsequence of all calls)."""

    type: Literal["tool.sequence"] = "tool.sequence"
    tools: list[str] = Field(min_length=1)

    def describe(self) -> str:
        return f"{self.type} {' > '.join(self.tools)}"


class CalledLeaf(Leaf[ToolCalled]):
    def __init__(self, spec: ToolCalled) -> None:
        super().__init__(spec, Interest.names(TOOL_CALL))
        self.tool = compile_pattern(spec.name)
        self.rule = spec.count_rule()
        self.what = f"calls of {spec.name}"

    def initial(self) -> Box:
        return Box(0)

    def feed(self, state: Box, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if self.tool.matches(tool_name(sig)):
            state.value += 1
            return self.rule.early(state.value, self.what)
        return None

    def finish(self, state: Box, facts: EpisodeFacts) -> Outcome:
        return self.rule.final(state.value, self.what)


class NotCalledLeaf(Leaf[ToolNotCalled]):
    def __init__(self, spec: ToolNotCalled) -> None:
        super().__init__(spec, Interest.names(TOOL_CALL))
        self.tool = compile_pattern(spec.name)

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if self.tool.matches(tool_name(sig)):
            return Outcome.failed(f"{tool_name(sig)} was called ({sig.id})")
        return None

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return Outcome.passed(f"{self.spec.name} was never called")


class CalledWithLeaf(Leaf[ToolCalledWith]):
    def __init__(self, spec: ToolCalledWith) -> None:
        super().__init__(spec, Interest.names(TOOL_CALL))
        self.tool = compile_pattern(spec.name)
        self.args = compile_expected(spec.args)

    def matches(self, sig: Signal) -> bool:
        return self.tool.matches(tool_name(sig)) and self.args(tool_args(sig))

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if self.matches(sig):
            return Outcome.passed(f"{tool_name(sig)} called with matching input ({sig.id})")
        return None

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return Outcome.failed(f"no call of {self.spec.name} with input matching {self.spec.args!r}")


class SequenceLeaf(Leaf[ToolSequence]):
    def __init__(self, spec: ToolSequence) -> None:
        super().__init__(spec, Interest.names(TOOL_CALL))
        self.tools: list[Pattern] = [compile_pattern(t) for t in spec.tools]

    def initial(self) -> Box:
        return Box(0)

    def feed(self, state: Box, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if self.tools[state.value].matches(tool_name(sig)):
            state.value += 1
            if state.value == len(self.tools):
                return Outcome.passed(f"tools called in order: {' > '.join(self.spec.tools)}")
        return None

    def finish(self, state: Box, facts: EpisodeFacts) -> Outcome:
        j = state.value
        return Outcome.failed(
            f"matched {j} of {len(self.tools)} tools in order; missing {self.spec.tools[j]}"
        )


def _calls(ep: ReferenceEpisode) -> list[Signal]:
    return ep.named(TOOL_CALL)


def ref_called(spec: ToolCalled, ep: ReferenceEpisode) -> Outcome:
    tool = compile_pattern(spec.name)
    n = sum(1 for s in _calls(ep) if tool.matches(tool_name(s)))
    return CountRule.of(spec.min, spec.max, spec.count, default_min=1).final(n, "calls")


def ref_not_called(spec: ToolNotCalled, ep: ReferenceEpisode) -> Outcome:
    tool = compile_pattern(spec.name)
    if any(tool.matches(tool_name(s)) for s in _calls(ep)):
        return Outcome.failed("called")
    return Outcome.passed("not called")


def ref_called_with(spec: ToolCalledWith, ep: ReferenceEpisode) -> Outcome:
    leaf = CalledWithLeaf(spec)
    if any(leaf.matches(s) for s in _calls(ep)):
        return Outcome.passed("called with")
    return Outcome.failed("not called with")


def ref_sequence(spec: ToolSequence, ep: ReferenceEpisode) -> Outcome:
    names = [tool_name(s) for s in _calls(ep)]
    pos = 0
    for wanted in spec.tools:
        pattern = compile_pattern(wanted)
        while pos < len(names) and not pattern.matches(names[pos]):
            pos += 1
        if pos == len(names):
            return Outcome.failed("sequence not found")
        pos += 1
    return Outcome.passed("sequence found")


TYPES = [
    AssertionType("tool.called", ToolCalled, leaf_builder(CalledLeaf), ref_called, "tool"),
    AssertionType(
        "tool.notCalled", ToolNotCalled, leaf_builder(NotCalledLeaf), ref_not_called, "tool"
    ),
    AssertionType(
        "tool.calledWith", ToolCalledWith, leaf_builder(CalledWithLeaf), ref_called_with, "tool"
    ),
    AssertionType("tool.sequence", ToolSequence, leaf_builder(SequenceLeaf), ref_sequence, "tool"),
]
