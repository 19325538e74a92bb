"""An example third-party assertion type: `text.deltas.max`, a cap on streamed chunks.

Register it in your package's metadata:

    [project.entry-points."evalstream.assertions"]
    textstats = "evalstream_textstats:TYPES"

and suites can use it like any built-in type:

    - type: text.deltas.max
      value: 500
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.kinds.base import AssertionType, Box, CompileContext, Interest, Leaf
from evalstream.assertions.wire.signals import Signal


class TextDeltasMax(AssertionSpec):
    """At most `value` streamed `text:delta` chunks in the episode."""

    type: Literal["text.deltas.max"] = "text.deltas.max"
    value: int = Field(ge=0)


class TextDeltasMaxLeaf(Leaf[TextDeltasMax]):
    def __init__(self, spec: TextDeltasMax) -> None:
        super().__init__(spec, Interest.names("text:delta"))

    def initial(self) -> Box:
        return Box(0)

    def feed(self, state: Box, sig: Signal, facts: EpisodeFacts) -> Outcome | None:
        state.value += 1
        if state.value > self.spec.value:  # decided at once: the cap is broken for good
            return Outcome.failed(f"{state.value} text deltas, over {self.spec.value}")
        return None

    def finish(self, state: Box, facts: EpisodeFacts) -> Outcome:
        return Outcome.passed(f"{state.value} text deltas (max {self.spec.value})")


def build(spec: TextDeltasMax, ctx: CompileContext) -> Leaf[Any]:
    return TextDeltasMaxLeaf(spec)


def reference(spec: TextDeltasMax, episode: ReferenceEpisode) -> Outcome:
    n = len(episode.named("text:delta"))
    ok = n <= spec.value
    return (Outcome.passed if ok else Outcome.failed)(f"{n} text deltas (max {spec.value})")


TYPES = [AssertionType("text.deltas.max", TextDeltasMax, build, reference, "example")]
