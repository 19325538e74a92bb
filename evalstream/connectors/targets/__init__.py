"""Targets: run the agent under evaluation for one dataset case and collect its signals."""

from evalstream.connectors.targets.base import (
    Target,
    TargetCall,
    TargetOutput,
    decode_signals,
    normalize,
)
from evalstream.connectors.targets.recorder import (
    CaseCancelled,
    Recorder,
    current_recorder,
    recording,
)
from evalstream.connectors.targets.spec import parse_target

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
