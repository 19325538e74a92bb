"""Episode facts: the compact per-episode accumulators every evaluator may read.

Updated once per signal before assertions see it, so `snapshot.at` sees the state right after
its signal and a cost budget includes the call that broke it. Holds metric sums, the state
dict, the output candidates and the tool-call names — never the raw signal list (DESIGN §3).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any

from evalstream.assertions.evaluation.matchers import is_number
from evalstream.assertions.wire.llm_calls import (
    content_text,
    is_state_change,
    model_of,
    output_value_text,
    provider_output_text,
    reported_cost,
    state_key_of,
    usage_of,
)
from evalstream.assertions.wire.pricing import PricingTable
from evalstream.assertions.wire.signals import Signal

JSON = Any
MAX_TOOL_SEQUENCE = 512  # tool calls remembered in order for tool match (1 KiB at most)
MAX_TOOL_NAMES = 1_024

# What a signal name means to the facts; resolved once per distinct name.
_NONE, _START, _END, _PSTART, _PEND, _ACT, _TEXT, _TOOL, _POLICY, _ERROR, _STATE = range(11)
_KIND_CACHE: dict[str, int] = {}
_FIXED_KINDS = {
    "harness:start": _START,
    "harness:end": _END,
    "provider:start": _PSTART,
    "provider:end": _PEND,
    "agent:activated": _ACT,
    "text:complete": _TEXT,
    "tool:call": _TOOL,
    "policy:violation": _POLICY,
}


def fact_kind(name: str) -> int:
    kind = _KIND_CACHE.get(name)
    if kind is None:
        kind = _FIXED_KINDS.get(name, _NONE)
        if kind == _NONE:
            if name.endswith(":error") or name == "error" or name.startswith("error:"):
                kind = _ERROR
            elif is_state_change(name):
                kind = _STATE
        if len(_KIND_CACHE) > 65536:  # custom names are unbounded in principle
            _KIND_CACHE.clear()
        _KIND_CACHE[name] = kind
    return kind


def is_error_signal(name: str) -> bool:
    return fact_kind(name) == _ERROR


@dataclass(slots=True)
class EpisodeMetrics:
    """Metrics of one episode, computed from its signals (DESIGN §4 metric.*)."""

    latency_ms: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_models: list[str] = field(default_factory=list)
    activations: int = 0
    tool_calls: int = 0
    llm_calls: int = 0
    errors: int = 0
    policy_violations: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        return {
            "latency_ms": self.latency_ms,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": round(self.cost_usd, 10),
            "cost_complete": not self.unpriced_models,
            "unpriced_models": self.unpriced_models,
            "activations": self.activations,
            "tool_calls": self.tool_calls,
            "llm_calls": self.llm_calls,
            "errors": self.errors,
            "policy_violations": self.policy_violations,
        }


class EpisodeFacts:
    __slots__ = (
        "activations",
        "cost_usd",
        "errors",
        "first_ts",
        "harness_duration_ms",
        "harness_output",
        "input_tokens",
        "last_model",
        "last_provider_output",
        "last_text_complete",
        "last_ts",
        "llm_calls",
        "model_by_agent",
        "output_tokens",
        "policy_violations",
        "pricing",
        "state",
        "tool_calls",
        "tool_name_ids",
        "tool_sequence",
        "total_tokens",
        "unpriced_models",
    )

    def __init__(self, pricing: PricingTable, default_model: str | None = None) -> None:
        self.pricing = pricing
        # Event-time bounds; infinities until the first signal (no None checks per signal).
        self.first_ts = math.inf
        self.last_ts = -math.inf
        self.state: dict[str, JSON] = {}
        self.harness_output: str | None = None
        self.harness_duration_ms: float | None = None
        self.last_text_complete: str | None = None
        self.last_provider_output: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.total_tokens = 0
        self.cost_usd = 0.0
        self.unpriced_models: list[str] = []
        self.llm_calls = 0
        self.activations = 0
        # The tool-call sequence (for order-aware scoring) as 2-byte indices into a small
        # name table, capped: state stays bounded by the suite, not the episode length.
        self.tool_calls = 0
        self.tool_name_ids: dict[str, int] = {}
        self.tool_sequence = array("H")
        self.errors = 0
        self.policy_violations: dict[str, int] = {}
        self.last_model = default_model
        self.model_by_agent: dict[str, str] = {}

    def observe(self, sig: Signal) -> None:
        """Update the facts with one signal (the engine inlines this on its hot path)."""
        ts = sig.ts
        if ts < self.first_ts:
            self.first_ts = ts
        if ts > self.last_ts:
            self.last_ts = ts
        kind = fact_kind(sig.name)
        if kind != _NONE:
            self.observe_kind(kind, sig)

    @property
    def started_ts(self) -> float | None:
        return None if self.first_ts == math.inf else self.first_ts

    @property
    def ended_ts(self) -> float | None:
        return None if self.last_ts == -math.inf else self.last_ts

    def observe_kind(self, kind: int, sig: Signal) -> None:
        payload = sig.payload
        if kind == _PEND:
            self._observe_call_end(sig)
        elif kind == _ACT:
            self.activations += 1
        elif kind == _TOOL:
            name = sig.payload_get("name")
            self.tool_calls += 1
            if len(self.tool_sequence) < MAX_TOOL_SEQUENCE:
                tool = name if isinstance(name, str) else ""
                index = self.tool_name_ids.get(tool)
                if index is None:
                    if len(self.tool_name_ids) >= MAX_TOOL_NAMES:
                        return  # beyond this many distinct names the sequence stops growing
                    index = self.tool_name_ids[tool] = len(self.tool_name_ids)
                self.tool_sequence.append(index)
        elif kind == _STATE:
            key = state_key_of(sig.name, payload)
            if key is not None and isinstance(payload, dict):
                self.state[key] = payload.get("newValue")
        elif kind == _TEXT:
            text = content_text(sig.payload_get("content"))
            if text is not None:
                self.last_text_complete = text
        elif kind == _PSTART:
            model = model_of(payload)
            if model is not None:
                self.last_model = model
                agent = sig.agent
                if agent is not None:
                    self.model_by_agent[agent] = model
        elif kind == _START:
            initial = sig.payload_get("state")
            if isinstance(initial, dict) and not self.state:
                self.state = dict(initial)
        elif kind == _END:
            if isinstance(payload, dict):
                if "output" in payload and payload["output"] is not None:
                    self.harness_output = output_value_text(payload["output"])
                duration = payload.get("durationMs")
                if is_number(duration):
                    self.harness_duration_ms = float(duration)
        elif kind == _ERROR:
            self.errors += 1
        elif kind == _POLICY:
            severity = sig.payload_get("severity")
            key = severity.lower() if isinstance(severity, str) else "unknown"
            self.policy_violations[key] = self.policy_violations.get(key, 0) + 1

    def _observe_call_end(self, sig: Signal) -> None:
        payload = sig.payload
        self.llm_calls += 1
        text = provider_output_text(payload)
        if text is not None:
            self.last_provider_output = text
        usage = usage_of(payload)
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.total_tokens += usage.total_tokens
        cost = reported_cost(payload)
        if cost is None:
            model = model_of(payload) or self.call_model(sig)
            # A call that reports no usage costs nothing we can know of.
            cost = 0.0 if usage is None else self.pricing.cost(model, usage)
            if cost is None:
                label = model or "<no model>"
                if label not in self.unpriced_models:
                    self.unpriced_models.append(label)
                return
        self.cost_usd += cost

    def call_model(self, sig: Signal) -> str | None:
        agent = sig.agent
        if agent is not None and agent in self.model_by_agent:
            return self.model_by_agent[agent]
        return self.last_model

    # --- derived values -------------------------------------------------------------------

    def output(self) -> str | None:
        """harness:end output, else the last text:complete, else the last provider:end text."""
        if self.harness_output is not None:
            return self.harness_output
        if self.last_text_complete is not None:
            return self.last_text_complete
        return self.last_provider_output

    def latency_ms(self) -> float:
        if self.harness_duration_ms is not None:
            return self.harness_duration_ms
        if self.first_ts == math.inf:
            return 0.0
        return self.last_ts - self.first_ts

    def tool_names(self) -> list[str]:
        """The tool-call sequence by name (the first MAX_TOOL_SEQUENCE calls)."""
        names = list(self.tool_name_ids)
        return [names[i] for i in self.tool_sequence]

    def metrics(self) -> EpisodeMetrics:
        return EpisodeMetrics(
            latency_ms=self.latency_ms(),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
            cost_usd=self.cost_usd,
            unpriced_models=list(self.unpriced_models),
            activations=self.activations,
            tool_calls=self.tool_calls,
            llm_calls=self.llm_calls,
            errors=self.errors,
            policy_violations=dict(self.policy_violations),
        )
