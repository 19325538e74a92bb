"""What a target is: something that, given a case, makes an agent run and yields its signals.

Three kinds ship (see `evalstream.connectors.targets.spec.parse_target`): a Python callable, an HTTP
endpoint and a subprocess. Each returns the signals it saw; `normalize` then makes them one
well-formed episode: the run's episode id on every signal, the run's attributes (`case_id`,
`run_id`, `variant`) on the first, and `harness:start` / `harness:end` around them unless the
target emitted its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalstream.assertions.errors import SignalDecodeError, TargetError
from evalstream.assertions.wire.signals import Signal, signal_from_obj
from evalstream.connectors.targets.recorder import Recorder

JSON = Any


@dataclass
class TargetCall:
    """One run of one case: what the target gets."""

    case_id: str
    input: JSON
    episode_id: str
    attrs: dict[str, JSON]
    recorder: Recorder
    config: dict[str, JSON] = field(default_factory=dict)
    # Raw signal objects received so far (subprocess / HTTP): kept when a run times out.
    received: list[JSON] = field(default_factory=list)

    def request_body(self) -> dict[str, JSON]:
        """What HTTP and subprocess targets receive (JSON)."""
        return {
            "caseId": self.case_id,
            "episodeId": self.episode_id,
            "input": self.input,
            "attrs": self.attrs,
            "config": self.config,
        }


@dataclass
class TargetOutput:
    signals: list[Signal | dict[str, JSON]]
    output: JSON = None


class Target(Protocol):
    """An agent to run. `describe` is shown in results (`target`)."""

    def describe(self) -> str: ...

    async def run(self, call: TargetCall) -> TargetOutput: ...

    async def aclose(self) -> None: ...


def decode_signals(
    items: Sequence[Signal | JSON], episode_id: str, default_ts: float
) -> list[Signal]:
    """Decode raw signal objects, forcing the run's episode id; a missing timestamp gets
    `default_ts` (the time it was received). A bad record is a `signals` error of the target."""
    out: list[Signal] = []
    for i, item in enumerate(items):
        if isinstance(item, Signal):
            item.episode_id = episode_id
            out.append(item)
            continue
        if not isinstance(item, dict):
            raise TargetError(
                f"signal {i}: expected a JSON object, got {type(item).__name__}", kind="signals"
            )
        obj = {**item, "episode_id": episode_id}
        obj.setdefault("timestamp", default_ts)
        try:
            out.append(signal_from_obj(obj))
        except SignalDecodeError as exc:
            raise TargetError(f"signal {i}: {exc.message}", kind="signals") from exc
    return out


def normalize(
    signals: Sequence[Signal],
    *,
    episode_id: str,
    attrs: dict[str, JSON],
    input: JSON,
    started_ms: float,
    ended_ms: float,
    output: JSON = None,
) -> list[Signal]:
    """One well-formed episode: harness:start first and harness:end last (added when the
    target did not emit them), the run's attributes on the first signal."""
    out = list(signals)
    names = {s.name for s in out}
    if "harness:start" not in names:
        first_ts = min([started_ms, *(s.ts for s in out)])
        state = input if isinstance(input, dict) else {"input": input}
        out.insert(
            0,
            Signal(
                f"{episode_id}:start",
                episode_id,
                "harness:start",
                first_ts,
                payload={"state": state},
            ),
        )
    if "harness:end" not in names:
        last_ts = max([ended_ms, *(s.ts for s in out)])
        payload: dict[str, JSON] = {"durationMs": max(0.0, ended_ms - started_ms)}
        if output is not None:
            payload["output"] = output
        out.append(Signal(f"{episode_id}:end", episode_id, "harness:end", last_ts, payload=payload))
    first = out[0]
    first.attrs = {**(first.attrs or {}), **attrs}
    return out
