"""The public test helpers catch an engine that disagrees with the reference."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import pytest

from evalstream.assertions.evaluation import registry
from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome, Verdict
from evalstream.assertions.kinds.base import AssertionType, Interest, Leaf, leaf_builder
from evalstream.assertions.testing import SignalFactory, evaluate_agreeing


class Inconsistent(AssertionSpec):
    type: Literal["test.inconsistent"] = "test.inconsistent"


class AlwaysPasses(Leaf[Inconsistent]):
    def __init__(self, spec: Inconsistent) -> None:
        super().__init__(spec, Interest.close_only())

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return Outcome.passed("engine")


def always_fails(spec: Inconsistent, episode: ReferenceEpisode) -> Outcome:
    return Outcome.failed("reference")


@pytest.fixture
def inconsistent_type() -> Iterator[None]:
    registry.register(
        AssertionType("test.inconsistent", Inconsistent, leaf_builder(AlwaysPasses), always_fails)
    )
    yield
    registry._extra.pop("test.inconsistent")  # registration is process-wide: undo it


@pytest.mark.usefixtures("inconsistent_type")
def test_disagreement_is_an_assertion_error() -> None:
    f = SignalFactory()
    with pytest.raises(AssertionError, match=r"engine says pass .* reference says fail"):
        evaluate_agreeing({"type": "test.inconsistent"}, [f("harness:start")])
    agreed = evaluate_agreeing(
        {"type": "signal.contains", "pattern": "harness:*"}, [f("harness:start")]
    )
    assert agreed.verdict is Verdict.PASS
