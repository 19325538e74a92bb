"""Plain, whole-list computations of episode facts for the reference evaluator.

Deliberately written as direct scans over the complete signal list, independent of the
incremental accumulators in `evalstream.assertions.evaluation.facts`, so property tests compare two
implementations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalstream.assertions.evaluation.matchers import is_number
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.judge.protocol import JudgeRequest
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
from evalstream.assertions.wire.pricing import PricingTable, default_pricing
from evalstream.assertions.wire.signals import Signal

JSON = Any
SyncJudge = Callable[[JudgeRequest], Outcome]


@dataclass
class ReferenceEpisode:
    signals: list[Signal]
    pricing: PricingTable = field(default_factory=default_pricing)
    default_model: str | None = None
    judge: SyncJudge | None = None
    # How a composite evaluates its children: set by `evalstream.assertions.evaluation.reference`
    # (which dispatches
    # through the registry, which imports the composites: handing it over avoids a cycle).
    evaluate: Callable[[Any, ReferenceEpisode], Outcome] | None = field(
        default=None, repr=False, compare=False
    )

    def state_after(self, index: int) -> dict[str, JSON]:
        """The state dict right after signals[index] (inclusive)."""
        state: dict[str, JSON] = {}
        for sig in self.signals[: index + 1]:
            if sig.name == "harness:start":
                initial = sig.payload_get("state")
                if isinstance(initial, dict) and not state:
                    state = dict(initial)
            elif is_state_change(sig.name):
                key = state_key_of(sig.name, sig.payload)
                if key is not None and isinstance(sig.payload, dict):
                    state[key] = sig.payload.get("newValue")
        return state

    def final_state(self) -> dict[str, JSON]:
        return self.state_after(len(self.signals) - 1)

    def output(self) -> str | None:
        for sig in reversed(self.signals):
            if sig.name == "harness:end" and isinstance(sig.payload, dict):
                value = sig.payload.get("output")
                if value is not None:
                    return output_value_text(value)
        for sig in reversed(self.signals):
            if sig.name == "text:complete":
                text = content_text(sig.payload_get("content"))
                if text is not None:
                    return text
        for sig in reversed(self.signals):
            if sig.name == "provider:end":
                text = provider_output_text(sig.payload)
                if text is not None:
                    return text
        return None

    def latency_ms(self) -> float:
        for sig in reversed(self.signals):
            if sig.name == "harness:end":
                duration = sig.payload_get("durationMs")
                if is_number(duration):
                    return float(duration)
        if not self.signals:
            return 0.0
        stamps = [s.ts for s in self.signals]
        return max(stamps) - min(stamps)

    def _model_before(self, index: int) -> str | None:
        call = self.signals[index]
        explicit = model_of(call.payload)
        if explicit is not None:
            return explicit
        fallback: str | None = None
        for back in range(index - 1, -1, -1):  # walk back without copying the list
            sig = self.signals[back]
            if sig.name != "provider:start":
                continue
            model = model_of(sig.payload)
            if model is None:
                continue
            if call.agent is not None and sig.agent == call.agent:
                return model
            if fallback is None:
                fallback = model
            if call.agent is None:
                return fallback
        if call.agent is not None and fallback is not None:
            return fallback
        return self.default_model

    def cost(self) -> tuple[float, list[str]]:
        """(known cost in USD, models without a price)."""
        total = 0.0
        unpriced: list[str] = []
        for i, sig in enumerate(self.signals):
            if sig.name != "provider:end":
                continue
            cost = reported_cost(sig.payload)
            if cost is None:
                usage = usage_of(sig.payload)
                model = self._model_before(i)
                cost = 0.0 if usage is None else self.pricing.cost(model, usage)
                if cost is None:
                    label = model or "<no model>"
                    if label not in unpriced:
                        unpriced.append(label)
                    continue
            total += cost
        return total, unpriced

    def tokens(self, field_name: str) -> int:
        total = 0
        for sig in self.signals:
            if sig.name == "provider:end":
                usage = usage_of(sig.payload)
                if usage is not None:
                    total += {
                        "input": usage.input_tokens,
                        "output": usage.output_tokens,
                        "total": usage.total_tokens,
                    }[field_name]
        return total

    def named(self, name: str) -> list[Signal]:
        return [s for s in self.signals if s.name == name]
