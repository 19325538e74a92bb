"""The pure core of evalstream: signals, episodes, assertions, the incremental engine.

No network, no Kafka, no clocks read directly: everything with an edge lives in `connectors/`
and `stream/`. Modules re-exported here form the public API.
"""

# Before any hot-path module is imported: compiled (mypyc) or pure Python, see native.py.
from assertions import native

native.select()

from assertions.errors import EvalstreamError, InputError, SignalDecodeError, SuiteError
from assertions.evaluation.assembly import CloseReason, CloseRules, EpisodeAssembler
from assertions.evaluation.engine import AssertionOutcome, EpisodeEvaluation, Plan, PlannedAssertion
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
