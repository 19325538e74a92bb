"""OpenMetrics exemplars that name the episode behind a per-episode observation.

A closed episode's verdicts, scores, deltas and alerts are counted in bounded series (no
episode id in their labels); each series also keeps its latest observation's exemplar,
`{episode_id="…", trace_id="…"}`, which Prometheus stores (`--enable-feature=exemplar-storage`)
and Grafana links to the episode. Exemplars appear only in the OpenMetrics exposition.

OpenMetrics limits an exemplar's label names and values to 128 UTF-8 characters together.
`trace_id` (a W3C trace id, 32 hex digits) is added when the episode came in over OTLP or
names one in its `trace_id` attribute; that leaves 118 characters for the episode id without
a trace and 78 with one. A longer id is shortened deterministically: its first characters,
`~`, and the first 16 hex digits of the SHA-256 of the whole id (see docs/operations.md,
"From an exemplar to the episode").
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

JSON = Any
MAX_LABEL_CHARS = 128  # OpenMetrics: an exemplar's label names and values together
EPISODE_LABEL = "episode_id"
TRACE_LABEL = "trace_id"
HASH_CHARS = 16  # hex digits of the SHA-256 that end a shortened episode id
TRACE_ID = re.compile(r"[0-9a-f]{32}")  # W3C / OTLP: 16 bytes as lower-case hex
OTLP_SIGNAL_PREFIX = "otel:"  # signals mapped from OTLP spans: otel:<trace id>:<span id>:…


@dataclass(frozen=True, slots=True)
class EpisodeExemplar:
    """The exemplar labels of one closed episode and when it was reported (Unix seconds)."""

    labels: dict[str, str]
    timestamp: float


def episode_exemplar(
    episode_id: str, attrs: dict[str, JSON], first_signal_id: str, timestamp: float
) -> EpisodeExemplar:
    trace_id = episode_trace_id(attrs, first_signal_id)
    budget = MAX_LABEL_CHARS - len(EPISODE_LABEL)
    if trace_id is None:
        return EpisodeExemplar({EPISODE_LABEL: exemplar_episode_id(episode_id, budget)}, timestamp)
    budget -= len(TRACE_LABEL) + len(trace_id)
    labels = {EPISODE_LABEL: exemplar_episode_id(episode_id, budget), TRACE_LABEL: trace_id}
    return EpisodeExemplar(labels, timestamp)


def exemplar_episode_id(episode_id: str, budget: int) -> str:
    """`episode_id` if it has at most `budget` characters, else its first characters, `~`
    and a hash of the whole id, `budget` characters in all (the same id always maps to the
    same value)."""
    if not episode_id.isascii():  # lone surrogates cannot be encoded in the exposition
        episode_id = episode_id.encode("utf-8", "replace").decode("utf-8")
    if len(episode_id) <= budget:
        return episode_id
    digest = hashlib.sha256(episode_id.encode("utf-8")).hexdigest()[:HASH_CHARS]
    return f"{episode_id[: budget - HASH_CHARS - 1]}~{digest}"


def episode_trace_id(attrs: dict[str, JSON], first_signal_id: str) -> str | None:
    """The episode's trace id: its `trace_id` attribute when that is a W3C trace id, else the
    trace of its first signal when that signal was mapped from an OTLP span."""
    value = attrs.get(TRACE_LABEL)
    if isinstance(value, str):
        value = value.lower().replace("-", "")
        if TRACE_ID.fullmatch(value):
            return value
    if first_signal_id.startswith(OTLP_SIGNAL_PREFIX):
        candidate = first_signal_id[len(OTLP_SIGNAL_PREFIX) : len(OTLP_SIGNAL_PREFIX) + 32]
        if TRACE_ID.fullmatch(candidate):
            return candidate
    return None
