"""The recorder: how an agent under evaluation emits its signals.

A target function receives a `Recorder` (or finds it with `current_recorder()`) and reports
what happens as it happens:

    def run(case_input, recorder):
        act = recorder.activated("router")
        call = recorder.tool_call("lookup_order", {"id": "A-1"}, agent="router", parent=act)
        recorder.tool_result(call, {"status": "shipped"}, agent="router")
        recorder.llm_call(model="claude-haiku-4-5", input=[...], output="…",
                          usage={"input_tokens": 120, "output_tokens": 40}, agent="router")
        recorder.state("ticket", {"status": "answered"}, agent="router")
        return "Your order has shipped."      # the episode output

Signals get ids with 96 random bits, the recorder's clock (wall time by default, injectable)
and the episode id of the run. Thread-safe: an instrumented SDK may record from another thread.

Cancellation: when the runner gives up on a case (timeout, fail-fast, Ctrl-C) it cancels the
recorder; the next call into it raises `CaseCancelled`, a BaseException so that an agent's
`except Exception` does not swallow it. That is how a synchronous target, which cannot be
interrupted from outside, stops at its next step.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO, Any

import orjson

from evalstream.assertions.wire.signals import Signal

JSON = Any
_CURRENT: ContextVar[Recorder | None] = ContextVar("evalstream_recorder", default=None)


class CaseCancelled(BaseException):
    """The runner cancelled this case; the target must stop."""


def wall_clock_ms() -> float:
    return time.time() * 1000.0


def current_recorder() -> Recorder | None:
    """The recorder of the case running in this context (None outside a dataset run)."""
    return _CURRENT.get()


@contextmanager
def recording(recorder: Recorder) -> Iterator[Recorder]:
    """Make `recorder` the current one for the code run inside (and threads it starts with
    `asyncio.to_thread` or `contextvars.copy_context`)."""
    token = _CURRENT.set(recorder)
    try:
        yield recorder
    finally:
        _CURRENT.reset(token)


class Recorder:
    def __init__(
        self,
        *,
        episode_id: str,
        case_id: str | None = None,
        input: JSON = None,
        attrs: dict[str, JSON] | None = None,
        config: dict[str, JSON] | None = None,
        clock: Callable[[], float] = wall_clock_ms,
        sink: Callable[[Signal], None] | None = None,
    ) -> None:
        self.episode_id = episode_id
        self.case_id = case_id
        self.input = input
        self.attrs = dict(attrs or {})
        self.config = dict(config or {})
        self.clock = clock
        self.sink = sink
        self.signals: list[Signal] = []
        self.state_values: dict[str, JSON] = {}
        self.final_output: JSON = None
        self._prefix = secrets.token_hex(12)  # 96 random bits per recorder
        self._names: dict[str, str] = {}
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._harness_started: float | None = None
        # Set when a cancelled synchronous target kept running past its grace period.
        self.abandoned = False

    # --- cancellation ----------------------------------------------------------------------

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check(self) -> None:
        """Raise CaseCancelled if the runner gave up on this case."""
        if self._cancelled.is_set():
            raise CaseCancelled(f"case {self.case_id} was cancelled")

    # --- the one primitive -----------------------------------------------------------------

    def emit(
        self,
        name: str,
        payload: JSON = None,
        *,
        agent: str | None = None,
        parent: str | None = None,
        provider: str | None = None,
    ) -> str:
        """Record one signal; returns its id (pass it as `parent` to link causes)."""
        self.check()
        with self._lock:
            seq = len(self.signals)
            sid = f"{self._prefix}-{seq}"
            ts = self.clock()
            sig = Signal(
                id=sid,
                episode_id=self.episode_id,
                name=name,
                ts=ts,
                seq=seq,
                agent=agent,
                parent=parent,
                provider=provider,
                payload=payload,
                attrs=dict(self.attrs) if seq == 0 and self.attrs else None,
            )
            self.signals.append(sig)
            self._names[sid] = name
        if self.sink is not None:
            self.sink(sig)
        return sid

    # --- conveniences for the standard vocabulary (DESIGN §2, the signal-native spec appendix)
    # -----------

    def start(self) -> str:
        """`harness:start` with the case input as the initial state (runners call this)."""
        self._harness_started = self.clock()
        state = self.input if isinstance(self.input, dict) else {"input": self.input}
        return self.emit("harness:start", {"state": state})

    def end(self, output: JSON = None, *, duration_ms: float | None = None) -> str:
        """`harness:end` with the duration and the output (runners call this)."""
        if output is not None:
            self.final_output = output
        if duration_ms is None:
            started = self._harness_started
            duration_ms = 0.0 if started is None else max(0.0, self.clock() - started)
        payload: dict[str, JSON] = {"durationMs": duration_ms, "state": dict(self.state_values)}
        if self.final_output is not None:
            payload["output"] = self.final_output
        return self.emit("harness:end", payload)

    def activated(self, agent: str, *, trigger: str | None = None) -> str:
        """`agent:activated`; `trigger` is the id of the signal that caused it."""
        payload: dict[str, JSON] = {"agent": agent}
        if trigger is not None and trigger in self._names:
            payload["trigger"] = self._names[trigger]
        return self.emit("agent:activated", payload, agent=agent, parent=trigger)

    def completed(self, agent: str, *, parent: str | None = None) -> str:
        return self.emit("agent:completed", {"agent": agent}, agent=agent, parent=parent)

    def skipped(self, agent: str, reason: str, *, trigger: str | None = None) -> str:
        payload: dict[str, JSON] = {"agent": agent, "reason": reason}
        if trigger is not None and trigger in self._names:
            payload["trigger"] = self._names[trigger]
        return self.emit("agent:skipped", payload, agent=agent, parent=trigger)

    def error(self, agent: str, message: str, *, parent: str | None = None) -> str:
        return self.emit(
            "agent:error", {"agent": agent, "error": message}, agent=agent, parent=parent
        )

    def tool_call(
        self, name: str, input: JSON = None, *, agent: str | None = None, parent: str | None = None
    ) -> str:
        call_id = f"call-{len(self.signals)}"
        return self.emit(
            "tool:call", {"id": call_id, "name": name, "input": input}, agent=agent, parent=parent
        )

    def tool_result(self, call: str, result: JSON, *, agent: str | None = None) -> str:
        tool_id = next(
            (
                s.payload_get("id")
                for s in reversed(self.signals)
                if s.id == call and s.name == "tool:call"
            ),
            call,
        )
        return self.emit("tool:result", {"id": tool_id, "result": result}, agent=agent, parent=call)

    def llm_call(
        self,
        *,
        model: str,
        input: JSON,
        output: str,
        usage: dict[str, int] | None = None,
        agent: str | None = None,
        provider: str = "anthropic",
        duration_ms: float = 0.0,
        tool_calls: list[JSON] | None = None,
        cost_usd: float | None = None,
        parent: str | None = None,
    ) -> str:
        """`provider:start` + `provider:end` for one model call; returns the end's id."""
        start = self.emit(
            "provider:start",
            {"model": model, "provider": provider, "input": input},
            agent=agent,
            parent=parent,
            provider=provider,
        )
        u = usage or {}
        inp, out = int(u.get("input_tokens", 0)), int(u.get("output_tokens", 0))
        end_payload: dict[str, JSON] = {
            "model": model,
            "output": {
                "content": output,
                "toolCalls": tool_calls or [],
                "usage": {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out},
            },
            "durationMs": duration_ms,
        }
        if cost_usd is not None:
            end_payload["costUsd"] = cost_usd
        return self.emit("provider:end", end_payload, agent=agent, parent=start, provider=provider)

    def state(self, key: str, value: JSON, *, agent: str | None = None) -> str:
        """`state:<key>:changed` {key, oldValue, newValue, agent}."""
        old = self.state_values.get(key)
        self.state_values[key] = value
        return self.emit(
            f"state:{key}:changed",
            {"key": key, "oldValue": old, "newValue": value, "agent": agent},
            agent=agent,
        )

    def text(self, content: str, *, agent: str | None = None, parent: str | None = None) -> str:
        """`text:complete` (the output, unless harness:end carries one)."""
        return self.emit("text:complete", {"content": content}, agent=agent, parent=parent)

    def output(self, value: JSON) -> None:
        """Set the episode output (written into harness:end)."""
        self.final_output = value


def jsonl_sink(stream: IO[str]) -> Callable[[Signal], None]:
    """Write each signal as one JSON line and flush (for agents run as a subprocess)."""

    def write(sig: Signal) -> None:
        stream.write(orjson.dumps(sig.to_wire(), default=str).decode() + "\n")
        stream.flush()

    return write
