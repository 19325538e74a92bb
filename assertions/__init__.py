"""The pure core of evalstream: signals, episodes, assertions, the incremental engine.

No network, no Kafka, no clocks read directly: everything with an edge lives in `connectors/`
and `stream/`. Names in `__all__` form the public API; each is imported on first use, so that
importing a single module of the package (a command line that only prints its help) does not
load the engine and every assertion type.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

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

_HOMES = {
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
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

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


def __getattr__(name: str) -> object:
    """The public names, imported from their modules on first use (PEP 562)."""
    home = _HOME_OF.get(name)
    if home is None:
        raise AttributeError(f"module 'assertions' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
