"""Targets: run the agent under evaluation for one dataset case and collect its signals."""

from connectors.targets.base import Target, TargetCall, TargetOutput, decode_signals, normalize
from connectors.targets.recorder import CaseCancelled, Recorder, current_recorder, recording
from connectors.targets.spec import parse_target

__all__ = [
    "CaseCancelled",
    "Recorder",
    "Target",
    "TargetCall",
    "TargetOutput",
    "current_recorder",
    "decode_signals",
    "normalize",
    "parse_target",
    "recording",
]
