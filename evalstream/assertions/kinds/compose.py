"""all / any / not: three-valued composition with early decision (DESIGN §4).

    all: fail if any child fails; else error if any child errors; else pass
    any: pass if any child passes; else error if any child errors; else fail
    not: pass <-> fail; error stays error

A composite decides as soon as its children settle it (`all` at the first failure, `any` at
the first pass); an error alone never decides early, since a later failure outranks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field, SerializeAsAny

from evalstream.assertions.errors import EvaluationError
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome, Verdict
from evalstream.assertions.kinds.base import AssertionType, CompileContext, Composite


class AllOf(AssertionSpec):
    """Every nested assertion passes."""

    type: Literal["all"] = "all"
    assertions: list[SerializeAsAny[AssertionSpec]] = Field(min_length=1)


class AnyOf(AssertionSpec):
    """At least one nested assertion passes."""

    type: Literal["any"] = "any"
    assertions: list[SerializeAsAny[AssertionSpec]] = Field(min_length=1)


class NotOf(AssertionSpec):
    """The nested assertion fails."""

    type: Literal["not"] = "not"
    assertion: SerializeAsAny[AssertionSpec]


def combine(kind: str, verdicts: Sequence[Verdict | None]) -> Verdict | None:
    """The composite verdict from its children's (None = undecided), or None if open."""
    if kind == "not":
        child = verdicts[0]
        if child is None:
            return None
        return {Verdict.PASS: Verdict.FAIL, Verdict.FAIL: Verdict.PASS}.get(child, Verdict.ERROR)
    decisive, other = (
        (Verdict.FAIL, Verdict.PASS) if kind == "all" else (Verdict.PASS, Verdict.FAIL)
    )
    if decisive in verdicts:
        return decisive
    if None in verdicts:
        return None
    if Verdict.ERROR in verdicts:
        return Verdict.ERROR
    return other


def describe_children(kind: str, children: Sequence[tuple[str, Outcome]]) -> str:
    parts = [
        f"[{i}] {label}: {o.verdict.value} ({o.message})" for i, (label, o) in enumerate(children)
    ]
    return f"{kind}: " + "; ".join(parts)


def _build(spec: AssertionSpec, ctx: CompileContext) -> Composite:
    if isinstance(spec, NotOf):
        return Composite(spec, "not", (spec.assertion,))
    assert isinstance(spec, AllOf | AnyOf)
    return Composite(spec, spec.type, tuple(spec.assertions))


def _reference(spec: AssertionSpec, ep: ReferenceEpisode) -> Outcome:
    evaluate_reference = (
        ep.evaluate
    )  # set by evalstream.assertions.evaluation.reference.evaluate_reference
    if evaluate_reference is None:
        raise EvaluationError(
            "composite assertions are evaluated through "
            "evalstream.assertions.evaluation.reference.evaluate_reference"
        )
    children = [spec.assertion] if isinstance(spec, NotOf) else list(spec.assertions)  # type: ignore[attr-defined]
    outcomes = [evaluate_reference(child, ep) for child in children]
    verdict = combine(spec.type, [o.verdict for o in outcomes])
    assert verdict is not None
    return Outcome(
        verdict,
        describe_children(
            spec.type, [(c.describe(), o) for c, o in zip(children, outcomes, strict=True)]
        ),
    )


TYPES = [
    AssertionType("all", AllOf, _build, _reference, "compose"),
    AssertionType("any", AnyOf, _build, _reference, "compose"),
    AssertionType("not", NotOf, _build, _reference, "compose"),
]
