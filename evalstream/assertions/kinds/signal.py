"""signal.contains / not / count / trajectory / first / last."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.matchers import Predicate, compile_expected
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.kinds.base import (
    AssertionType,
    Box,
    CountRule,
    Interest,
    Leaf,
    count_rule_problems,
    leaf_builder,
    plural,
)
from evalstream.assertions.wire.patterns import Pattern, compile_pattern
from evalstream.assertions.wire.signals import Signal

JSON = Any


def _check_payload(value: JSON) -> JSON:
    if value is not None:
        compile_expected(value, "payload")
    return value


class _PatternSpec(AssertionSpec):
    pattern: str = Field(min_length=1, description="Glob over signal names (`*`, `**`).")
    payload: JSON = Field(None, description="Partial payload match; value matchers at leaves.")

    _v_payload = field_validator("payload")(_check_payload)

    def describe(self) -> str:
        return f"{self.type} {self.pattern}"


class SignalContains(_PatternSpec):
    """Passes when a signal matching `pattern` (and `payload`) occurs."""

    type: Literal["signal.contains"] = "signal.contains"


class SignalNot(_PatternSpec):
    """Fails as soon as a signal matching `pattern` (and `payload`) occurs."""

    type: Literal["signal.not"] = "signal.not"


class SignalCount(_PatternSpec):
    """The number of matching signals is within `min` / `max`, or equals `exact`."""

    type: Literal["signal.count"] = "signal.count"
    min: int | None = None
    max: int | None = None
    exact: int | None = None

    @model_validator(mode="after")
    def _bounds(self) -> SignalCount:
        if self.min is None and self.max is None and self.exact is None:
            raise ValueError("signal.count needs `min`, `max` or `exact`")
        problem = count_rule_problems(self.min, self.max, self.exact)
        if problem:
            raise ValueError(problem)
        return self


class SignalFirst(_PatternSpec):
    """The first signal matching `pattern` has the expected `payload`."""

    type: Literal["signal.first"] = "signal.first"


class SignalLast(_PatternSpec):
    """The last signal matching `pattern` has the expected `payload`."""

    type: Literal["signal.last"] = "signal.last"


class TrajectoryStep(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    pattern: str = Field(min_length=1)
    payload: JSON = None

    _v_payload = field_validator("payload")(_check_payload)


def _step(item: Any) -> Any:
    """One trajectory step: a pattern string, or {pattern, payload?} validated with a message
    that names the real problem (not pydantic's union noise)."""
    if isinstance(item, str | TrajectoryStep):
        return item
    if not isinstance(item, dict):
        raise ValueError(f"a step is a pattern string or {{pattern, payload?}}, got {item!r}")
    try:
        return TrajectoryStep.model_validate(item)
    except ValidationError as exc:
        errors = exc.errors()
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        field = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            raise ValueError(
                f"unknown field {field!r}; a step has `pattern` and `payload`"
            ) from exc
        message = str(err["msg"]).removeprefix("Value error, ")
        raise ValueError(f"{field}: {message}") from exc


Step = Annotated[str | TrajectoryStep, BeforeValidator(_step)]


class SignalTrajectory(AssertionSpec):
    """Signals occur in this order: a subsequence, or contiguous when `strict`."""

    type: Literal["signal.trajectory"] = "signal.trajectory"
    patterns: list[Step] = Field(min_length=1)
    strict: bool = False
    ignore: list[str] = Field(
        default_factory=list, description="With strict: names to skip, e.g. text:delta."
    )

    def steps(self) -> list[TrajectoryStep]:
        return [
            p if isinstance(p, TrajectoryStep) else TrajectoryStep(pattern=p) for p in self.patterns
        ]


# --- matching ------------------------------------------------------------------------------


class SignalMatcher:
    __slots__ = ("label", "pattern", "payload")

    def __init__(self, pattern: str, payload: JSON) -> None:
        self.pattern: Pattern = compile_pattern(pattern)
        self.payload: Predicate | None = None if payload is None else compile_expected(payload)
        self.label = pattern if payload is None else f"{pattern} with payload {payload!r}"

    def payload_ok(self, sig: Signal) -> bool:
        return self.payload is None or self.payload(sig.payload)

    def matches(self, sig: Signal) -> bool:
        return self.pattern.matches(sig.name) and (
            self.payload is None or self.payload(sig.payload)
        )


# --- incremental ---------------------------------------------------------------------------


class ContainsLeaf(Leaf[SignalContains]):
    def __init__(self, spec: SignalContains) -> None:
        super().__init__(spec, Interest.names(spec.pattern))
        self.m = SignalMatcher(spec.pattern, spec.payload)

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if self.m.payload_ok(sig):
            return Outcome.passed(f"found {sig.name} ({sig.id})")
        return None

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return Outcome.failed(f"no signal matching {self.m.label}")


class NotLeaf(Leaf[SignalNot]):
    def __init__(self, spec: SignalNot) -> None:
        super().__init__(spec, Interest.names(spec.pattern))
        self.m = SignalMatcher(spec.pattern, spec.payload)

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if self.m.payload_ok(sig):
            return Outcome.failed(f"forbidden signal {sig.name} ({sig.id}) matches {self.m.label}")
        return None

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return Outcome.passed(f"no signal matching {self.m.label}")


class CountLeaf(Leaf[SignalCount]):
    def __init__(self, spec: SignalCount) -> None:
        super().__init__(spec, Interest.names(spec.pattern))
        self.m = SignalMatcher(spec.pattern, spec.payload)
        self.rule = CountRule(spec.min, spec.max, spec.exact)
        self.what = f"signals matching {self.m.label}"

    def initial(self) -> Box:
        return Box(0)

    def feed(self, state: Box, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if self.m.payload_ok(sig):
            state.value += 1
            return self.rule.early(state.value, self.what)
        return None

    def finish(self, state: Box, facts: EpisodeFacts) -> Outcome:
        return self.rule.final(state.value, self.what)


class FirstLeaf(Leaf[SignalFirst]):
    def __init__(self, spec: SignalFirst) -> None:
        super().__init__(spec, Interest.names(spec.pattern))
        self.m = SignalMatcher(spec.pattern, spec.payload)

    def feed(self, state: Any, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        if self.m.payload_ok(sig):
            return Outcome.passed(f"first {sig.name} ({sig.id}) matches")
        return Outcome.failed(f"first {sig.name} ({sig.id}) does not match {self.m.label}")

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return Outcome.failed(f"no signal matching {self.spec.pattern}")


class LastLeaf(Leaf[SignalLast]):
    """Keeps only the last matching signal's payload (bounded), judged at close."""

    def __init__(self, spec: SignalLast) -> None:
        super().__init__(spec, Interest.names(spec.pattern))
        self.m = SignalMatcher(spec.pattern, spec.payload)

    def initial(self) -> Box:
        return Box(None)

    def feed(self, state: Box, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        state.value = sig
        return None

    def finish(self, state: Box, facts: EpisodeFacts) -> Outcome:
        last: Signal | None = state.value
        return _judge_last(self.m, last)


def _judge_last(m: SignalMatcher, last: Signal | None) -> Outcome:
    if last is None:
        return Outcome.failed(f"no signal matching {m.pattern.source}")
    if m.payload_ok(last):
        return Outcome.passed(f"last {last.name} ({last.id}) matches")
    return Outcome.failed(f"last {last.name} ({last.id}) does not match {m.label}")


class TrajectoryLeaf(Leaf[SignalTrajectory]):
    """Non-strict: greedy in-order subsequence. Strict: anchored at the first signal matching
    the first step; every following non-ignored signal must match the next step, so a break
    is decided at once."""

    def __init__(self, spec: SignalTrajectory) -> None:
        steps = spec.steps()
        interest = (
            Interest.all_except(*spec.ignore)
            if spec.strict
            else Interest.names(*(s.pattern for s in steps))
        )
        super().__init__(spec, interest)
        self.steps = [SignalMatcher(s.pattern, s.payload) for s in steps]
        self.k = len(self.steps)

    def initial(self) -> Box:
        return Box(0)

    def feed(self, state: Box, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        j: int = state.value
        if self.steps[j].matches(sig):
            j += 1
            state.value = j
            if j == self.k:
                return Outcome.passed(f"all {plural(self.k, 'step')} matched in order")
            return None
        if self.spec.strict and j > 0:
            return Outcome.failed(
                f"strict trajectory broken at {sig.name} ({sig.id}): step {j + 1} expects "
                f"{self.steps[j].label}"
            )
        return None

    def finish(self, state: Box, facts: EpisodeFacts) -> Outcome:
        j: int = state.value
        return Outcome.failed(
            f"matched {j} of {plural(self.k, 'step')}; missing step {j + 1}: {self.steps[j].label}"
        )


# --- reference -----------------------------------------------------------------------------


def _candidates(m: SignalMatcher, ep: ReferenceEpisode) -> list[Signal]:
    return [s for s in ep.signals if m.pattern.matches(s.name)]


def ref_contains(spec: SignalContains, ep: ReferenceEpisode) -> Outcome:
    m = SignalMatcher(spec.pattern, spec.payload)
    for sig in _candidates(m, ep):
        if m.payload_ok(sig):
            return Outcome.passed("found")
    return Outcome.failed("not found")


def ref_not(spec: SignalNot, ep: ReferenceEpisode) -> Outcome:
    m = SignalMatcher(spec.pattern, spec.payload)
    for sig in _candidates(m, ep):
        if m.payload_ok(sig):
            return Outcome.failed("forbidden signal present")
    return Outcome.passed("absent")


def ref_count(spec: SignalCount, ep: ReferenceEpisode) -> Outcome:
    m = SignalMatcher(spec.pattern, spec.payload)
    n = sum(1 for sig in _candidates(m, ep) if m.payload_ok(sig))
    return CountRule(spec.min, spec.max, spec.exact).final(n, "signals")


def ref_first(spec: SignalFirst, ep: ReferenceEpisode) -> Outcome:
    m = SignalMatcher(spec.pattern, spec.payload)
    found = _candidates(m, ep)
    if not found:
        return Outcome.failed("none")
    return Outcome.passed("ok") if m.payload_ok(found[0]) else Outcome.failed("mismatch")


def ref_last(spec: SignalLast, ep: ReferenceEpisode) -> Outcome:
    m = SignalMatcher(spec.pattern, spec.payload)
    found = _candidates(m, ep)
    return _judge_last(m, found[-1] if found else None)


def ref_trajectory(spec: SignalTrajectory, ep: ReferenceEpisode) -> Outcome:
    steps = [SignalMatcher(s.pattern, s.payload) for s in spec.steps()]
    if not spec.strict:
        pos = 0
        for step in steps:
            while pos < len(ep.signals) and not step.matches(ep.signals[pos]):
                pos += 1
            if pos == len(ep.signals):
                return Outcome.failed("subsequence not found")
            pos += 1
        return Outcome.passed("subsequence found")
    ignored = [compile_pattern(p) for p in spec.ignore]
    kept = [s for s in ep.signals if not any(p.matches(s.name) for p in ignored)]
    start = next((i for i, s in enumerate(kept) if steps[0].matches(s)), None)
    if start is None:
        return Outcome.failed("first step never matched")
    for offset, step in enumerate(steps[1:], start=1):
        if start + offset >= len(kept):
            return Outcome.failed("episode ended mid-trajectory")
        if not step.matches(kept[start + offset]):
            return Outcome.failed("contiguity broken")
    return Outcome.passed("contiguous run found")


TYPES = [
    AssertionType(
        "signal.contains", SignalContains, leaf_builder(ContainsLeaf), ref_contains, "signal"
    ),
    AssertionType("signal.not", SignalNot, leaf_builder(NotLeaf), ref_not, "signal"),
    AssertionType("signal.count", SignalCount, leaf_builder(CountLeaf), ref_count, "signal"),
    AssertionType(
        "signal.trajectory",
        SignalTrajectory,
        leaf_builder(TrajectoryLeaf),
        ref_trajectory,
        "signal",
    ),
    AssertionType("signal.first", SignalFirst, leaf_builder(FirstLeaf), ref_first, "signal"),
    AssertionType("signal.last", SignalLast, leaf_builder(LastLeaf), ref_last, "signal"),
]
