"""The contract between assertion families and the engine.

A `Leaf` is compiled once from a spec and shared by every episode; its per-episode state is a
separate small object (`initial()`), so the engine can hold, snapshot or drop it:

    state = leaf.initial()
    leaf.feed(state, signal, facts) -> Outcome | None   # None: not decided yet
    leaf.finish(state, facts) -> Outcome                # at episode close

`feed` is only called for signals whose names the leaf's `interest` admits, and never again
once the leaf has decided. The reference twin `reference(spec, episode)` evaluates the same
rule plainly over the complete signal list; property tests hold the two equal.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

from pydantic import BaseModel, model_validator

from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.wire.patterns import Pattern, compile_pattern
from evalstream.assertions.wire.pricing import PricingTable, default_pricing
from evalstream.assertions.wire.signals import Signal

if TYPE_CHECKING:
    from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode

JSON = Any
S = TypeVar("S", bound=AssertionSpec)


@dataclass(frozen=True, slots=True)
class Interest:
    """Which signal names a leaf must see. `patterns=None` means every name except `excludes`."""

    patterns: tuple[Pattern, ...] | None = ()
    excludes: tuple[Pattern, ...] = ()

    @staticmethod
    def names(*sources: str) -> Interest:
        return Interest(tuple(compile_pattern(s) for s in sources))

    @staticmethod
    def close_only() -> Interest:
        return Interest(())

    @staticmethod
    def all_except(*sources: str) -> Interest:
        return Interest(None, tuple(compile_pattern(s) for s in sources))

    def admits(self, name: str) -> bool:
        if self.patterns is None:
            return not any(p.matches(name) for p in self.excludes)
        return any(p.matches(name) for p in self.patterns)


@dataclass(frozen=True)
class CompileContext:
    pricing: PricingTable = field(default_factory=default_pricing)


class Leaf(ABC, Generic[S]):
    STATE_VERSION: ClassVar[int] = 1
    is_judge: ClassVar[bool] = False

    def __init__(self, spec: S, interest: Interest) -> None:
        self.spec = spec
        self.interest = interest

    def initial(self) -> Any:
        return None

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        return None

    @abstractmethod
    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome: ...


@dataclass(frozen=True)
class Composite:
    """all / any / not: the engine evaluates these itself, three-valued with early decision."""

    spec: AssertionSpec
    kind: str  # "all" | "any" | "not"
    children: tuple[AssertionSpec, ...]


Node = Leaf[Any] | Composite
Compiler = Callable[[Any, CompileContext], Node]
Reference = Callable[[Any, "ReferenceEpisode"], Outcome]


@dataclass(frozen=True)
class AssertionType:
    """A registered assertion type: its spec model, compiler and reference evaluator."""

    name: str
    spec: type[AssertionSpec]
    compile: Compiler
    reference: Reference
    family: str = "custom"


def leaf_builder(cls: Callable[[Any], Leaf[Any]]) -> Compiler:
    """The compiler of a type whose leaf is built from its spec alone."""

    def build(spec: Any, ctx: CompileContext) -> Leaf[Any]:
        return cls(spec)

    return build


class Box:
    """A tiny mutable state cell for leaves that keep one value."""

    __slots__ = ("value",)

    def __init__(self, value: Any = None) -> None:
        self.value = value


# --- count rules shared by signal.count, agent.activated, metric.activations, tool.called ----


@dataclass(frozen=True, slots=True)
class CountRule:
    """min / max / exact over a count that only grows; decides as early as is sound."""

    min: int | None = None
    max: int | None = None
    exact: int | None = None

    @staticmethod
    def of(
        min: int | None, max: int | None, exact: int | None, *, default_min: int | None
    ) -> CountRule:
        if min is None and max is None and exact is None:
            return CountRule(min=default_min)
        return CountRule(min, max, exact)

    def describe(self) -> str:
        if self.exact is not None:
            return f"exactly {self.exact}"
        if self.min is not None and self.max is not None:
            return f"between {self.min} and {self.max}"
        if self.max is not None:
            return f"at most {self.max}"
        return f"at least {self.min or 0}"

    def early(self, n: int, what: str) -> Outcome | None:
        if self.exact is not None:
            if n > self.exact:
                return Outcome.failed(f"expected {self.describe()} {what}, already {n}")
            return None
        if self.max is not None:
            if n > self.max:
                return Outcome.failed(f"expected {self.describe()} {what}, already {n}")
            return None
        if self.min is not None and n >= self.min:
            return Outcome.passed(f"{n} {what} (expected {self.describe()})")
        return None

    def final(self, n: int, what: str) -> Outcome:
        ok = (
            n == self.exact
            if self.exact is not None
            else (self.min is None or n >= self.min) and (self.max is None or n <= self.max)
        )
        if ok:
            return Outcome.passed(f"{n} {what} (expected {self.describe()})")
        return Outcome.failed(f"expected {self.describe()} {what}, found {n}")


class CountBounds(BaseModel):
    """Fields of a count assertion: `count` (exact) or `min` / `max`; none means at least once."""

    count: int | None = None
    min: int | None = None
    max: int | None = None

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        problem = count_rule_problems(self.min, self.max, self.count)
        if problem:
            raise ValueError(problem.replace("`exact`/", ""))
        return self

    def count_rule(self) -> CountRule:
        return CountRule.of(self.min, self.max, self.count, default_min=1)


def count_rule_problems(min: int | None, max: int | None, exact: int | None) -> str | None:
    """A validation message for inconsistent bounds, or None."""
    for label, value in (("min", min), ("max", max), ("exact", exact)):
        if value is not None and value < 0:
            return f"`{label}` must be >= 0, got {value}"
    if exact is not None and (min is not None or max is not None):
        return "use either `exact`/`count` or `min`/`max`, not both"
    if min is not None and max is not None and min > max:
        return f"`min` ({min}) is above `max` ({max})"
    return None


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def short(value: JSON, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def first_index(items: Sequence[Signal], pred: Callable[[Signal], bool]) -> int | None:
    for i, item in enumerate(items):
        if pred(item):
            return i
    return None
