"""The pure core of evalstream: signals, episodes, assertions, the incremental engine.

No network, no Kafka, no clocks read directly: everything with an edge lives in
`evalstream/connectors/` and `evalstream/stream/`. Names in `__all__` form the public API; each is
imported on first use, so that importing a single module of the package (a command line that only
prints its help) does not load the engine and every assertion type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalstream.assertions.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from evalstream.assertions.errors import (
        EvalstreamError,
        InputError,
        SignalDecodeError,
        SuiteError,
    )
    from evalstream.assertions.evaluation.assembly import CloseReason, CloseRules, EpisodeAssembler
    from evalstream.assertions.evaluation.engine import (
        AssertionOutcome,
        EpisodeEvaluation,
        Plan,
        PlannedAssertion,
    )
    from evalstream.assertions.evaluation.registry import parse_assertion
    from evalstream.assertions.evaluation.verdicts import Outcome, Verdict
    from evalstream.assertions.suite_format.suites import Suite, SuiteSet, load_suite
    from evalstream.assertions.wire.signals import Signal, decode_signal, signal_from_obj

__all__ = [
    "AssertionOutcome",
    "CloseReason",
    "CloseRules",
    "EpisodeAssembler",
    "EpisodeEvaluation",
    "EvalstreamError",
    "InputError",
    "Outcome",
    "Plan",
    "PlannedAssertion",
    "Signal",
    "SignalDecodeError",
    "Suite",
    "SuiteError",
    "SuiteSet",
    "Verdict",
    "decode_signal",
    "load_suite",
    "parse_assertion",
    "signal_from_obj",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "evalstream.assertions.errors": (
            "EvalstreamError",
            "InputError",
            "SignalDecodeError",
            "SuiteError",
        ),
        "evalstream.assertions.evaluation.assembly": (
            "CloseReason",
            "CloseRules",
            "EpisodeAssembler",
        ),
        "evalstream.assertions.evaluation.engine": (
            "AssertionOutcome",
            "EpisodeEvaluation",
            "Plan",
            "PlannedAssertion",
        ),
        "evalstream.assertions.evaluation.registry": ("parse_assertion",),
        "evalstream.assertions.evaluation.verdicts": ("Outcome", "Verdict"),
        "evalstream.assertions.suite_format.suites": ("Suite", "SuiteSet", "load_suite"),
        "evalstream.assertions.wire.signals": ("Signal", "decode_signal", "signal_from_obj"),
    },
)
