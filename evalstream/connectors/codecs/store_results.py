"""One episode of the episode-store -> its `EpisodeResult`, without building signals.

Scoring without suites reads only what the facts accumulate (counts, cost, tokens, latency,
output, the tool sequence), so `episode_result` computes those straight from the episode, in
one walk of its steps, instead of building its signals (`store_episodes`) and running them
through assembly and the engine. It walks the episode with the same validating walker
(`EpisodeWalk`), so it rejects exactly the episodes `episode_to_signals` rejects, with the
same `StoreEpisodeError`; and what it computes is what `EpisodeFacts` would compute from
those signals, signal by signal (the differential test `tests/property/test_store_results.py`
compares the two on generated and mutated episodes):

- `llm_calls`, `tool_calls`, `activations` (one), `total_tokens` and `cost_usd` from the
  LLM and tool steps; `errors` counts the error signals: an `error` step, a step with an
  `error`, a kept unknown step whose `step:<type>` name is an error name;
- latency is the `harness:end` duration (`ended_at - started_at`); the output is the
  metadata output, else the last LLM call's text; no cost is unpriced (an LLM call without
  a cost is rejected); there are no policy violations (no step type reports one);
- `started_ts`/`ended_ts` are the smallest and largest signal times, `close_reason` is
  `ended`, or `end_of_input` for a running episode (no end signals).

It returns None for the rare episode whose signals would not be evaluated one for one: step
indices that collide (their signals would be deduplicated), more steps than assembly
deduplicates over, or a metadata output that cannot be serialised (its evaluation would
fail). The caller then takes the signal path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalstream.assertions.evaluation.facts import (
    MAX_TOOL_SEQUENCE,
    EpisodeMetrics,
    is_error_signal,
)
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.wire.llm_calls import content_text, output_value_text
from evalstream.connectors.codecs.store_episodes import EpisodeWalk, StoreStep, UnknownSteps

JSON = Any
# At most three signals a step plus four: well inside assembly's default deduplication
# window (65,536 signals) and maximum episode size, so no signal is dropped or truncated.
MAX_DIRECT_STEPS = 20_000


@dataclass(frozen=True, slots=True)
class StoreResult:
    """What scoring needs of one episode: its result, its tool-call names and its start (the
    time of its first signal, which orders episodes)."""

    result: EpisodeResult
    tool_names: list[str]
    start: float
    running: bool


class _NeedsSignalsError(Exception):
    """The episode is outside what the direct computation reproduces exactly."""


class _ResultWalk(EpisodeWalk):
    """Accumulates, step by step, what `EpisodeFacts` accumulates from the step's signals."""

    def __init__(self, unknown_steps: UnknownSteps) -> None:
        super().__init__(unknown_steps)
        self.started = 0.0
        self.attrs: dict[str, JSON] = {}
        self.first_ts = math.inf
        self.last_ts = -math.inf
        self.signals = 0
        self.llm_calls = 0
        self.tool_calls = 0
        self.errors = 0
        self.total_tokens = 0
        self.cost = 0.0
        self.tool_names: list[str] = []
        self.provider_output: str | None = None
        self.harness_output: str | None = None
        self.duration_ms: float | None = None

    def seen(self, ts: float) -> None:
        # min/max keep the first value unless the new one compares below/above it, as the
        # facts' `ts < first_ts` does, so that even a NaN time ends up the same.
        self.first_ts = min(self.first_ts, ts)
        self.last_ts = max(self.last_ts, ts)

    def ordered(self, steps: list[tuple[int, Mapping[str, JSON]]]) -> None:
        if len(steps) > MAX_DIRECT_STEPS or len({index for index, _ in steps}) != len(steps):
            raise _NeedsSignalsError

    def start(self, started: float, attrs: dict[str, JSON]) -> None:
        self.started = started
        self.attrs = attrs
        self.seen(started)
        self.signals += 2  # harness:start, agent:activated

    def llm_call(self, step: StoreStep, model: str | None, provider: str | None) -> None:
        self.seen(step.ts)
        self.seen(step.end)
        self.signals += 2
        self.llm_calls += 1
        text = content_text(step.obj.get("output_summary"))
        if text is not None:
            self.provider_output = text
        if step.tokens is not None:
            self.total_tokens += max(0, int(step.tokens))
        assert step.cost is not None  # the walker rejects an LLM call without one
        self.cost += max(0.0, step.cost)
        self.step_error(step)

    def step_error(self, step: StoreStep) -> None:
        if step.error:
            self.seen(step.end)
            self.signals += 1
            self.errors += 1

    def tool_call(self, step: StoreStep, name: str) -> None:
        self.seen(step.ts)
        self.signals += 1
        self.tool_calls += 1
        if len(self.tool_names) < MAX_TOOL_SEQUENCE:
            self.tool_names.append(name)
        self.step_error(step)

    def tool_result(self, step: StoreStep, name: str | None) -> None:
        self.seen(step.end)
        self.signals += 1
        self.step_error(step)

    def decision(self, step: StoreStep) -> None:
        self.seen(step.end)
        self.signals += 1
        self.step_error(step)

    def error_step(self, step: StoreStep, message: JSON) -> None:
        self.seen(step.end)
        self.signals += 1
        self.errors += 1

    def unknown_step(self, step: StoreStep, step_type: str) -> None:
        self.seen(step.end)
        self.signals += 1
        if is_error_signal(f"step:{step_type}"):
            self.errors += 1

    def end(self, finish: float, duration_ms: float, output: JSON) -> None:
        self.seen(finish)
        self.signals += 2  # agent:completed or agent:stopped, harness:end
        if output is not None:
            try:
                self.harness_output = output_value_text(output)
            except Exception as exc:  # e.g. an integer beyond 64 bits: evaluation would fail
                raise _NeedsSignalsError from exc
        self.duration_ms = float(duration_ms)

    def result(self) -> StoreResult:
        ended = self.duration_ms is not None
        if self.duration_ms is not None:
            latency = self.duration_ms
        elif self.first_ts == math.inf:
            latency = 0.0
        else:
            latency = self.last_ts - self.first_ts
        metrics = EpisodeMetrics(
            latency_ms=latency,
            total_tokens=self.total_tokens,
            cost_usd=self.cost,
            activations=1,
            tool_calls=self.tool_calls,
            llm_calls=self.llm_calls,
            errors=self.errors,
        )
        case_id = self.attrs.get("case_id")
        output = self.harness_output if self.harness_output is not None else self.provider_output
        result = EpisodeResult(
            episode_id=self.episode_id,
            case_id=case_id if isinstance(case_id, str) else None,
            close_reason="ended" if ended else "end_of_input",
            signals=self.signals,
            duplicates=0,
            assertions=[],
            metrics=metrics,
            attrs=dict(self.attrs),
            started_ts=None if self.first_ts == math.inf else self.first_ts,
            ended_ts=None if self.last_ts == -math.inf else self.last_ts,
            output=output,
        )
        return StoreResult(result, self.tool_names, self.started, self.status == "running")


def episode_result(
    obj: Mapping[str, JSON], *, where: str = "episode", unknown_steps: UnknownSteps = "error"
) -> StoreResult | None:
    """The result of one episode-store episode evaluated without suites, or None when it must
    take the signal path (see the module docstring). Raises `StoreEpisodeError` exactly as
    `episode_to_signals` does; `where` prefixes its message."""
    walk = _ResultWalk(unknown_steps)
    try:
        walk.walk(obj, where)
    except _NeedsSignalsError:
        return None
    return walk.result()
