"""The reference evaluator: each assertion evaluated plainly over the complete signal list.

It exists to check the incremental engine (property tests hold their verdicts equal) and is
the simplest statement of what each assertion means. It is not used on live traffic.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.registry import type_of
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome, error_from_exception


def evaluate_reference(spec: AssertionSpec, episode: ReferenceEpisode) -> Outcome:
    if episode.evaluate is None:
        episode.evaluate = evaluate_reference  # what composites evaluate their children with
    try:
        return type_of(spec).reference(spec, episode)
    except Exception as exc:  # the same errors-as-data rule as the engine
        return error_from_exception(exc)


def evaluate_all(specs: Sequence[AssertionSpec], episode: ReferenceEpisode) -> list[Outcome]:
    return [evaluate_reference(spec, episode) for spec in specs]
