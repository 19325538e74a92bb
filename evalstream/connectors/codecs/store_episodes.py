"""One episode of the episode-store -> native signals (DESIGN §2).

The episode shape is in `../shared/notes/episode-store-formats.md`: `{episode_id, agent_id, status,
steps[], started_at, ended_at, metadata, ...}`, each step `{step_index, step_type, tool_name,
model, provider, input_summary, output_summary, tokens, cost_usd, duration_ms, timestamp,
error, air_record_id, metadata}`.

What one episode becomes, in order (ids derive from the episode id and step index, so a
redelivered episode deduplicates signal by signal; every signal has `source.agent`):

- the start: `harness:start` {agents} (it carries the episode `attrs`), `agent:activated`;
- an `llm_call` step: `provider:start` {model, provider, input} and `provider:end`
  {output: {content, usage: {totalTokens}}, durationMs, costUsd, model, airRecordId?};
- a `tool_call` step: `tool:call` {id, name, input};
- a `tool_result` step: `tool:result` {id, name, result}, its id and parent those of the
  latest call of that tool without a result;
- a `decision` step: `agent:decision` {agent, input, output};
- an `error` step: `agent:error` {agent, error};
- any other step with an `error`: after its signals, `provider:error` (an LLM call; its cost
  still counts), `tool:error` (tool steps) or `agent:error` (a decision);
- a final status: `agent:completed` (success) or `agent:stopped` {agent, status}, then
  `harness:end` {durationMs, status, output?}.

A `running` episode gets no end signals: it is still open. Its `attrs` are `agent_id`,
`status`, `model` and `provider` (of the first LLM call), `source: "episode-store"`, and
from `metadata` whichever of `case_id`, `run_id`, `variant`, `baseline_key`, `tenant`, `tags`
it has.

Rules that keep a regression visible (every violation raises `StoreEpisodeError`, naming the
episode, the step and the fix — never a silent zero):

- `episode_id`, `agent_id` (non-empty strings), `status` (one of STATUSES) and `steps` (a
  list) are required; `step_type` must be one of STEP_TYPES, unless `unknown_steps="keep"`,
  which turns such a step into a `step:<type>` signal that counts toward nothing (but an
  error, when the type ends in `:error`).
- `cost_usd` is required on an `llm_call` (the store records no token split, so cost cannot
  be recomputed from a pricing table) and must be a finite number >= 0 on every step; a
  non-zero cost on a non-LLM step is rejected, since evalstream counts cost from LLM calls.
  `tokens` and `duration_ms` must be numbers >= 0 (`tokens` whole). When the episode states
  `total_cost_usd`, it must equal the sum of its step costs (a truncated step list).
- Latency is wall-clock: `ended_at - started_at`. Without `started_at` the first step's
  `timestamp` starts the episode; without `ended_at` the end of the last step (its
  `timestamp + duration_ms`) ends it. A step without `timestamp` starts where the previous
  one ended. An episode with no time at all is rejected.
- The final output (`harness:end.output`) is `metadata.final_output` or `metadata.output`
  when present; otherwise the episode output is the last LLM call's `output_summary`.

`EpisodeWalk` applies these rules step by step; `episode_to_signals` builds the signals from
its walk, and `store_results.episode_result` the result scoring reads, by the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from operator import itemgetter
from typing import Any, Literal

from evalstream.assertions.errors import SignalDecodeError
from evalstream.assertions.wire.signals import Signal, parse_timestamp

JSON = Any
STEP_TYPES = ("llm_call", "tool_call", "tool_result", "decision", "error")
STATUSES = ("running", "success", "failure", "timeout", "killed")
METADATA_ATTRS = ("case_id", "run_id", "variant", "baseline_key", "tenant", "tags")
OUTPUT_METADATA_KEYS = ("final_output", "output")
COST_TOLERANCE_USD = 1e-9  # float sums of decimal costs; anything larger is a real gap
UnknownSteps = Literal["error", "keep"]


class StoreEpisodeError(SignalDecodeError):
    """An episode-store episode that cannot be turned into signals.

    `reason` is a stable code (`not_an_object`, `missing_field`, `bad_field`, `bad_cost`,
    `unknown_step_type`, `bad_timestamp`, `cost_mismatch`), usable as a dead-letter reason.
    """


def _fail(reason: str, where: str, message: str) -> StoreEpisodeError:
    return StoreEpisodeError(reason, f"{where}: {message}")


def _text(obj: Mapping[str, JSON], key: str, where: str, *, required: bool) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise _fail("missing_field", where, f"has no `{key}` (a non-empty string)")
        return None
    if not isinstance(value, str) or (required and not value):
        raise _fail("bad_field", where, f"`{key}` must be a non-empty string, got {value!r}")
    return value


def _amount(obj: Mapping[str, JSON], key: str, where: str, reason: str) -> float | None:
    """A finite number >= 0, or None when absent; anything else raises."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(reason, where, f"`{key}` must be a number >= 0, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise _fail(reason, where, f"`{key}` must be a finite number >= 0, got {value!r}")
    return number


def _number(value: JSON) -> float | None:
    """`value` as a float when it is a finite number >= 0 of an exact JSON number type; None
    otherwise (absent or not valid: `_amount` then decides, with its message). The check
    every valid value passes, without building the message's `where`."""
    kind = type(value)
    if kind is float or kind is int:
        number = float(value)
        if 0.0 <= number < math.inf:
            return number
    return None


def _time(obj: Mapping[str, JSON], key: str, where: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise _fail("bad_timestamp", where, f"`{key}` {value!r}: {exc}") from exc


def _ordered_steps(raw: list[JSON], where: str) -> list[tuple[int, Mapping[str, JSON]]]:
    """(step index, step), by `step_index` when every step has one, else in list order."""
    steps: list[tuple[int, Mapping[str, JSON]]] = []
    indexed = True  # every step has a `step_index`
    for pos, step in enumerate(raw):
        if type(step) is not dict and not isinstance(step, Mapping):
            at = f"{where} steps[{pos}]"
            raise _fail("not_an_object", at, f"a step must be an object, got {step!r}")
        index = step.get("step_index")
        if index is None:
            indexed = False
            steps.append((pos, step))
            continue
        if (
            type(index) is not int and (isinstance(index, bool) or not isinstance(index, int))
        ) or index < 0:
            at = f"{where} steps[{pos}]"
            raise _fail("bad_field", at, f"`step_index` must be an integer >= 0, got {index!r}")
        steps.append((index, step))
    if indexed:
        if len({index for index, _ in steps}) != len(steps):
            seen: set[int] = set()
            for index, _ in steps:
                if index in seen:
                    raise _fail("bad_field", where, f"two steps have `step_index` {index}")
                seen.add(index)
        steps.sort(key=itemgetter(0))
    return steps


def _episode_attrs(
    obj: Mapping[str, JSON], agent_id: str, status: str, metadata: Mapping[str, JSON]
) -> dict[str, JSON]:
    attrs: dict[str, JSON] = {"agent_id": agent_id, "status": status, "source": "episode-store"}
    for step in obj["steps"]:
        if isinstance(step, Mapping) and step.get("step_type") == "llm_call":
            for key in ("model", "provider"):
                if isinstance(step.get(key), str) and step[key]:
                    attrs[key] = step[key]
            break
    for key in METADATA_ATTRS:
        if metadata.get(key) is not None:
            attrs[key] = metadata[key]
    return attrs


class StoreStep:
    """One validated step: where it is, when it starts and ends, its cost and error."""

    __slots__ = ("cost", "end", "error", "index", "obj", "tokens", "ts", "where")

    def __init__(self, index: int, obj: Mapping[str, JSON], where: str, ts: float) -> None:
        """`where` names the episode; `at` adds the step (built only for a message)."""
        self.index = index
        self.obj = obj
        self.where = where
        self.ts = ts
        get = obj.get
        duration = get("duration_ms")
        if duration is not None:
            duration = _number(duration)
            if duration is None:
                duration = _amount(obj, "duration_ms", self.at, "bad_field")
        self.end = ts + (duration or 0.0)
        tokens = get("tokens")
        if tokens is not None:
            tokens = _number(tokens)
            if tokens is None:
                tokens = _amount(obj, "tokens", self.at, "bad_field")
            if tokens is not None and not tokens.is_integer():
                raise _fail(
                    "bad_field", self.at, f"`tokens` must be a whole number, got {tokens!r}"
                )
        self.tokens = tokens
        cost = get("cost_usd")
        if cost is not None:
            cost = _number(cost)
            if cost is None:
                cost = _amount(obj, "cost_usd", self.at, "bad_cost")
        self.cost = cost
        self.error = get("error")

    @property
    def at(self) -> str:
        """Where the step is, for messages: the episode, then `step <index>`."""
        return f"{self.where} step {self.index}"


def _step_text(step: StoreStep, key: str, *, required: bool) -> str | None:
    """`_text` of a step field, naming the step only when the field is not valid."""
    value = step.obj.get(key)
    if type(value) is str and value:
        return value
    if value is None and not required:
        return None
    return _text(step.obj, key, step.at, required=required)


class EpisodeWalk:
    """Validates one episode (the rules of the module docstring) and hands each validated
    part, in order, to a hook; subclasses say what the parts become (signals here, an
    episode result in `store_results`), so both read episodes by the same rules.

    A hook runs only once its part is valid; a violation raises `StoreEpisodeError` before
    the hook of the step it is in, and the walk's end (`end`) comes after every check.
    """

    def __init__(self, unknown_steps: UnknownSteps = "error") -> None:
        self.unknown_steps = unknown_steps
        self.episode_id = ""
        self.agent_id = ""
        self.status = ""
        self.cost_usd = 0.0  # the sum of the LLM calls' costs, checked against the stated total

    # --- hooks ----------------------------------------------------------------------------

    def ordered(self, steps: list[tuple[int, Mapping[str, JSON]]]) -> None:
        """The steps in the order they are walked, before any of them is checked."""

    def start(self, started: float, attrs: dict[str, JSON]) -> None:
        """The episode starts at `started` (epoch ms) with these attributes."""

    def llm_call(self, step: StoreStep, model: str | None, provider: str | None) -> None:
        """An LLM call (its `cost` is known)."""

    def tool_call(self, step: StoreStep, name: str) -> None:
        """A call of tool `name`."""

    def tool_result(self, step: StoreStep, name: str | None) -> None:
        """A tool's result."""

    def decision(self, step: StoreStep) -> None:
        """A decision step."""

    def error_step(self, step: StoreStep, message: JSON) -> None:
        """An `error` step, with its message (`error`, else `output_summary`)."""

    def unknown_step(self, step: StoreStep, step_type: str) -> None:
        """A step of a type outside STEP_TYPES, kept (`unknown_steps="keep"`)."""

    def end(self, finish: float, duration_ms: float, output: JSON) -> None:
        """A finished episode ends at `finish`; `output` is the metadata output, or None."""

    # --- the walk -------------------------------------------------------------------------

    def walk(self, obj: Mapping[str, JSON], where: str) -> None:
        """Validate `obj` and call the hooks; `where` prefixes every error message."""
        episode_id, agent_id, status, raw_steps, metadata = _header(obj, where)
        self.episode_id, self.agent_id, self.status = episode_id, agent_id, status
        where = f"{where} {episode_id!r}"
        steps = _ordered_steps(raw_steps, where)
        self.ordered(steps)
        started = _time(obj, "started_at", where)
        ended = _time(obj, "ended_at", where)
        if started is None:
            for index, raw in steps:
                started = _time(raw, "timestamp", f"{where} step {index}")
                if started is not None:
                    break
        if started is None:
            raise _fail(
                "missing_field",
                where,
                "has no `started_at` and no step has a `timestamp`: its latency is unknown",
            )

        self.start(started, _episode_attrs(obj, agent_id, status, metadata))
        cursor = started
        for index, raw in steps:
            ts = _time(raw, "timestamp", f"{where} step {index}")
            if ts is None:
                ts = cursor
            current = StoreStep(index, raw, where, ts)
            cursor = max(cursor, current.end)
            self._step(current)

        stated = _amount(obj, "total_cost_usd", where, "bad_cost")
        if stated is not None and abs(stated - self.cost_usd) > COST_TOLERANCE_USD + 1e-9 * stated:
            raise _fail(
                "cost_mismatch",
                where,
                f"`total_cost_usd` {stated!r} is not the sum of its step costs "
                f"({self.cost_usd!r}): are steps missing? Fetch the full episode",
            )
        if status == "running":
            return
        finish = cursor if ended is None else ended
        if finish < started:
            raise _fail(
                "bad_timestamp", where, f"`ended_at` is {started - finish:g} ms before `started_at`"
            )
        output = None
        for key in OUTPUT_METADATA_KEYS:
            if metadata.get(key) is not None:
                output = metadata[key]
                break
        self.end(finish, finish - started, output)

    def _step(self, step: StoreStep) -> None:
        step_type = step.obj.get("step_type")
        if step_type is None:
            raise _fail("missing_field", step.at, f"has no `step_type` ({', '.join(STEP_TYPES)})")
        if step_type == "llm_call":
            if step.cost is None:
                raise _fail(
                    "bad_cost",
                    step.at,
                    "LLM call has no `cost_usd`; the store keeps no token split, so its cost "
                    "cannot be priced: record the cost (0 for a free model)",
                )
            self.cost_usd += step.cost
            model = _step_text(step, "model", required=False)
            provider = _step_text(step, "provider", required=False)
            self.llm_call(step, model, provider)
            return
        if step.cost:
            raise _fail(
                "bad_cost",
                step.at,
                f"{step_type} step has `cost_usd` {step.cost!r}, but evalstream counts cost "
                "from LLM calls only: record it on the LLM call that spent it",
            )
        if step_type == "tool_call":
            name = _step_text(step, "tool_name", required=True)
            assert name is not None
            self.tool_call(step, name)
        elif step_type == "tool_result":
            self.tool_result(step, _step_text(step, "tool_name", required=False))
        elif step_type == "decision":
            self.decision(step)
        elif step_type == "error":
            message = step.error if step.error is not None else step.obj.get("output_summary")
            self.error_step(step, message)
        elif self.unknown_steps == "keep" and isinstance(step_type, str) and step_type:
            self.unknown_step(step, step_type)
        else:
            raise _fail(
                "unknown_step_type",
                step.at,
                f"unknown `step_type` {step_type!r}; valid: {', '.join(STEP_TYPES)}",
            )


class _SignalBuilder(EpisodeWalk):
    """Builds the signals of one episode with derived ids and sequence numbers."""

    def __init__(self, unknown_steps: UnknownSteps) -> None:
        super().__init__(unknown_steps)
        self.signals: list[Signal] = []
        self.open_calls: dict[str, list[str]] = {}  # tool name -> calls without a result yet
        self.begin = ""

    def add(
        self,
        suffix: str,
        name: str,
        ts: float,
        payload: JSON,
        *,
        parent: str | None = None,
        provider: str | None = None,
        attrs: dict[str, JSON] | None = None,
    ) -> Signal:
        sig = Signal(
            id=f"{self.episode_id}:{suffix}",
            episode_id=self.episode_id,
            name=name,
            ts=ts,
            seq=len(self.signals),
            agent=self.agent_id,
            parent=parent,
            provider=provider,
            payload=payload,
            attrs=attrs,
        )
        self.signals.append(sig)
        return sig

    def start(self, started: float, attrs: dict[str, JSON]) -> None:
        agent_id = self.agent_id
        begin = self.add("start", "harness:start", started, {"agents": [agent_id]}, attrs=attrs)
        self.begin = begin.id
        self.add(
            "activated",
            "agent:activated",
            started,
            {"agent": agent_id, "trigger": "harness:start"},
            parent=begin.id,
        )

    def llm_call(self, step: StoreStep, model: str | None, provider: str | None) -> None:
        obj, index = step.obj, step.index
        call = self.add(
            f"{index}:start",
            "provider:start",
            step.ts,
            {"model": model, "provider": provider, "input": obj.get("input_summary")},
            provider=provider,
        )
        output: dict[str, JSON] = {"content": obj.get("output_summary")}
        if step.tokens is not None:
            output["usage"] = {"totalTokens": int(step.tokens)}
        payload: dict[str, JSON] = {
            "output": output,
            "durationMs": step.end - step.ts,
            "costUsd": step.cost,
            "model": model,
        }
        if obj.get("air_record_id") is not None:
            payload["airRecordId"] = obj["air_record_id"]
        if step.error:
            payload["error"] = step.error
        done = self.add(f"{index}:end", "provider:end", step.end, payload, parent=call.id)
        if step.error:
            self.add(
                f"{index}:error",
                "provider:error",
                step.end,
                {"error": step.error, "model": model},
                parent=done.id,
                provider=provider,
            )

    def tool_call(self, step: StoreStep, name: str) -> None:
        call_id = f"{self.episode_id}:{step.index}:tool"
        self.open_calls.setdefault(name, []).append(call_id)
        call = self.add(
            f"{step.index}:tool",
            "tool:call",
            step.ts,
            {"id": call_id, "name": name, "input": step.obj.get("input_summary")},
        )
        self.tool_error(step, call_id, name, call.id)

    def tool_result(self, step: StoreStep, name: str | None) -> None:
        pending = self.open_calls.get(name or "")
        call_id = pending.pop() if pending else None
        result = self.add(
            f"{step.index}:result",
            "tool:result",
            step.end,
            {"id": call_id, "name": name, "result": step.obj.get("output_summary")},
            parent=call_id,
        )
        self.tool_error(step, call_id, name, result.id)

    def tool_error(
        self, step: StoreStep, call_id: str | None, name: str | None, parent: str
    ) -> None:
        if step.error:
            self.add(
                f"{step.index}:error",
                "tool:error",
                step.end,
                {"id": call_id, "name": name, "error": step.error},
                parent=parent,
            )

    def decision(self, step: StoreStep) -> None:
        obj = step.obj
        made = self.add(
            f"{step.index}:decision",
            "agent:decision",
            step.end,
            {
                "agent": self.agent_id,
                "input": obj.get("input_summary"),
                "output": obj.get("output_summary"),
            },
        )
        if step.error:
            self.add(
                f"{step.index}:error",
                "agent:error",
                step.end,
                {"agent": self.agent_id, "error": step.error},
                parent=made.id,
            )

    def error_step(self, step: StoreStep, message: JSON) -> None:
        self.add(
            f"{step.index}:error",
            "agent:error",
            step.end,
            {"agent": self.agent_id, "error": message},
        )

    def unknown_step(self, step: StoreStep, step_type: str) -> None:
        self.add(f"{step.index}:step", f"step:{step_type}", step.end, dict(step.obj))

    def end(self, finish: float, duration_ms: float, output: JSON) -> None:
        status = self.status
        done = "agent:completed" if status == "success" else "agent:stopped"
        self.add("done", done, finish, {"agent": self.agent_id, "status": status})
        end_payload: dict[str, JSON] = {"durationMs": duration_ms, "status": status}
        if output is not None:
            end_payload["output"] = output
        self.add("end", "harness:end", finish, end_payload, parent=self.begin)


def _header(obj: JSON, where: str) -> tuple[str, str, str, list[JSON], Mapping[str, JSON]]:
    """(episode id, agent id, status, raw steps, metadata), validated."""
    if not isinstance(obj, Mapping):
        raise _fail("not_an_object", where, f"an episode must be a JSON object, got {obj!r}")
    episode_id = _text(obj, "episode_id", where, required=True)
    assert episode_id is not None
    where = f"{where} {episode_id!r}"
    agent_id = _text(obj, "agent_id", where, required=True)
    assert agent_id is not None
    status = obj.get("status")
    if status is None:
        raise _fail("missing_field", where, f"has no `status` (one of {', '.join(STATUSES)})")
    if status not in STATUSES:
        raise _fail(
            "bad_field", where, f"unknown `status` {status!r}; valid: {', '.join(STATUSES)}"
        )
    steps = obj.get("steps")
    if steps is None:
        raise _fail("missing_field", where, "has no `steps` (a list; fetch the episode by id)")
    if not isinstance(steps, list):
        raise _fail("bad_field", where, f"`steps` must be a list, got {type(steps).__name__}")
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise _fail("bad_field", where, f"`metadata` must be an object, got {metadata!r}")
    return episode_id, agent_id, status, steps, metadata


def episode_to_signals(
    obj: Mapping[str, JSON], *, where: str = "episode", unknown_steps: UnknownSteps = "error"
) -> list[Signal]:
    """The signals of one episode-store episode (see the module docstring for the rules).

    `where` prefixes every error message (a file name and line, a URL).
    """
    out = _SignalBuilder(unknown_steps)
    out.walk(obj, where)
    return out.signals
