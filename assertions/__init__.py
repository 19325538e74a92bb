"""The pure core of evalstream: signals, episodes, assertions, the incremental engine.

No network, no Kafka, no clocks read directly: everything with an edge lives in `connectors/`
and `stream/`. Names in `__all__` form the public API; each is imported on first use, so that
importing a single module of the package (a command line that only prints its help) does not
load the engine and every assertion type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assertions.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from assertions.errors import EvalstreamError, InputError, SignalDecodeError, SuiteError
    from assertions.evaluation.assembly import CloseReason, CloseRules, EpisodeAssembler
    from assertions.evaluation.engine import (
        AssertionOutcome,
        EpisodeEvaluation,
        Plan,
        PlannedAssertion,
    )
    from assertions.evaluation.registry import parse_assertion
    from assertions.evaluation.verdicts import Outcome, Verdict
    from assertions.suite_format.suites import Suite, SuiteSet, load_suite
    from assertions.wire.signals import Signal, decode_signal, signal_from_obj

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
        "assertions.errors": ("EvalstreamError", "InputError", "SignalDecodeError", "SuiteError"),
        "assertions.evaluation.assembly": ("CloseReason", "CloseRules", "EpisodeAssembler"),
        "assertions.evaluation.engine": (
            "AssertionOutcome",
            "EpisodeEvaluation",
            "Plan",
            "PlannedAssertion",
        ),
        "assertions.evaluation.registry": ("parse_assertion",),
        "assertions.evaluation.verdicts": ("Outcome", "Verdict"),
        "assertions.suite_format.suites": ("Suite", "SuiteSet", "load_suite"),
        "assertions.wire.signals": ("Signal", "decode_signal", "signal_from_obj"),
    },
)
