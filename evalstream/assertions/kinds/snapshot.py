"""snapshot.at / snapshot.final: the state dict built from `state:<key>:changed` signals."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.matchers import (
    PathPart,
    Predicate,
    compile_expected,
    parse_path,
    resolve_path,
)
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.kinds.base import AssertionType, CompileContext, Interest, Leaf, short
from evalstream.assertions.wire.patterns import compile_pattern
from evalstream.assertions.wire.signals import Signal

JSON = Any


class _SnapshotSpec(AssertionSpec):
    path: str = Field(description="State path such as `analysis.confidence` or `files[0].path`.")
    value: JSON = Field(None, description="Expected value or value matcher (set even to null).")
    exists: bool | None = None

    @model_validator(mode="after")
    def _check(self) -> _SnapshotSpec:
        parse_path(self.path)
        if "value" in self.model_fields_set:
            compile_expected(self.value, "value")
            if self.exists is False:
                raise ValueError("`exists: false` cannot be combined with an expected `value`")
        return self

    def describe(self) -> str:
        return f"{self.type} {self.path}"


class SnapshotAt(_SnapshotSpec):
    """The state right after the first signal matching `afterSignal` satisfies `path`."""

    type: Literal["snapshot.at"] = "snapshot.at"
    after_signal: str = Field(alias="afterSignal", min_length=1)


class SnapshotFinal(_SnapshotSpec):
    """The final state satisfies `path`."""

    type: Literal["snapshot.final"] = "snapshot.final"


class PathCheck:
    __slots__ = ("exists", "expected", "parts", "path", "raw")

    def __init__(self, spec: _SnapshotSpec) -> None:
        self.path = spec.path
        self.parts: tuple[PathPart, ...] = parse_path(spec.path)
        has_value = "value" in spec.model_fields_set
        self.expected: Predicate | None = compile_expected(spec.value) if has_value else None
        self.raw = spec.value
        self.exists = spec.exists if spec.exists is not None else True

    def check(self, state: dict[str, JSON], when: str) -> Outcome:
        found, actual = resolve_path(state, self.parts)
        if not self.exists:
            if found:
                return Outcome.failed(f"{self.path} exists {when} (= {short(actual)})")
            return Outcome.passed(f"{self.path} absent {when}")
        if not found:
            keys = ", ".join(sorted(state)) or "none"
            return Outcome.failed(f"{self.path} not found in state {when} (top-level keys: {keys})")
        if self.expected is None:
            return Outcome.passed(f"{self.path} exists {when}")
        if self.expected(actual):
            return Outcome.passed(f"{self.path} = {short(actual)} {when}")
        return Outcome.failed(f"{self.path} = {short(actual)} {when}, expected {short(self.raw)}")


class SnapshotAtLeaf(Leaf[SnapshotAt]):
    def __init__(self, spec: SnapshotAt) -> None:
        super().__init__(spec, Interest.names(spec.after_signal))
        self.check = PathCheck(spec)

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        return self.check.check(facts.state, f"after {sig.name} ({sig.id})")

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return Outcome.failed(f"no signal matching {self.spec.after_signal} occurred")


class SnapshotFinalLeaf(Leaf[SnapshotFinal]):
    def __init__(self, spec: SnapshotFinal) -> None:
        super().__init__(spec, Interest.close_only())
        self.check = PathCheck(spec)

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return self.check.check(facts.state, "at the end")


def ref_at(spec: SnapshotAt, ep: ReferenceEpisode) -> Outcome:
    pattern = compile_pattern(spec.after_signal)
    for i, sig in enumerate(ep.signals):
        if pattern.matches(sig.name):
            return PathCheck(spec).check(ep.state_after(i), "after")
    return Outcome.failed("never seen")


def ref_final(spec: SnapshotFinal, ep: ReferenceEpisode) -> Outcome:
    state = ep.final_state() if ep.signals else {}
    return PathCheck(spec).check(state, "at the end")


def _build_at(spec: SnapshotAt, ctx: CompileContext) -> Leaf[Any]:
    return SnapshotAtLeaf(spec)


def _build_final(spec: SnapshotFinal, ctx: CompileContext) -> Leaf[Any]:
    return SnapshotFinalLeaf(spec)


TYPES = [
    AssertionType("snapshot.at", SnapshotAt, _build_at, ref_at, "snapshot"),
    AssertionType("snapshot.final", SnapshotFinal, _build_final, ref_final, "snapshot"),
]
