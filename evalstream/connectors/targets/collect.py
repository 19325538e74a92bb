"""Outputs for graders: a target run once per (question, attempt), its output kept.

The target gets the question's input as a dataset run's case does (`caseId` is the item key,
`input` the item's input). The output is the target's returned output, else the episode's
`harness:end` payload `output` (kept as JSON: a regression grader compares structures), else
the last `text:complete` content. A run that fails, times out or yields no output becomes an
`OutputError` for that attempt: graded `error`, never a pass.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalstream.assertions.errors import TargetError
from evalstream.assertions.harness.grading import OutputError
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.targets.base import Target, TargetCall, TargetOutput, decode_signals
from evalstream.connectors.targets.recorder import Recorder, wall_clock_ms

JSON = Any


@dataclass(frozen=True)
class Question:
    key: str
    input: JSON
    timeout_s: float


def output_of(out: TargetOutput, episode_id: str) -> JSON:
    """The run's output, or None when it produced none."""
    if out.output is not None:
        return out.output
    signals: list[Signal] = decode_signals(out.signals, episode_id, wall_clock_ms())
    for sig in reversed(signals):
        output = sig.payload_get("output") if sig.name == "harness:end" else None
        if output is not None:
            return output
    for sig in reversed(signals):
        if sig.name == "text:complete":
            content = sig.payload_get("content")
            if content is not None:
                return content
    return None


async def run_once(target: Target, question: Question, attempt: int, run_id: str) -> JSON:
    episode_id = f"{run_id}-{question.key}-{attempt}"
    attrs: dict[str, JSON] = {"case_id": question.key, "run_id": run_id, "attempt": attempt}
    recorder = Recorder(
        episode_id=episode_id, case_id=question.key, input=question.input, attrs=attrs
    )
    call = TargetCall(question.key, question.input, episode_id, attrs, recorder)
    try:
        async with asyncio.timeout(question.timeout_s):
            out = await target.run(call)
        output = output_of(out, episode_id)
    except TimeoutError:
        recorder.cancel()
        return OutputError(f"target timed out after {question.timeout_s:g} s")
    except TargetError as exc:
        return OutputError(f"target error: {exc}")
    except Exception as exc:  # the agent's own failure is data, not a crash of the run
        return OutputError(f"target error: {type(exc).__name__}: {exc}")
    if output is None:
        return OutputError(
            "the target returned no output (return one, or emit harness:end with "
            "payload.output or a text:complete signal)"
        )
    return output


async def collect_outputs(
    target: Target,
    questions: Sequence[Question],
    *,
    attempts: int,
    concurrency: int,
    on_done: Callable[[str, int], None] | None = None,
) -> dict[str, JSON]:
    """`{key: {"attempts": [...]}}`, as an outputs file spells several attempts."""
    run_id = secrets.token_hex(4)
    gate = asyncio.Semaphore(concurrency)
    results: dict[str, list[JSON]] = {q.key: [None] * attempts for q in questions}

    async def job(question: Question, attempt: int) -> None:
        async with gate:
            results[question.key][attempt] = await run_once(target, question, attempt, run_id)
        if on_done is not None:
            on_done(question.key, attempt)

    try:
        await asyncio.gather(*(job(q, a) for q in questions for a in range(attempts)))
    finally:
        await target.aclose()
    return {key: {"attempts": outs} for key, outs in results.items()}
