"""OTLP traces (protobuf or JSON) -> signals, by the OpenTelemetry GenAI semantic conventions
and OpenInference.

Decoding yields plain `Span` records from either encoding; mapping turns each span into a
start signal at its start time and an end signal at its end time:

| span (GenAI operation / OpenInference kind)      | start           | end (on error)   |
|--------------------------------------------------|-----------------|------------------|
| chat, text_completion, generate_content,         | provider:start  | provider:end     |
| embeddings / LLM, EMBEDDING                      |                 | (provider:error) |
| execute_tool / TOOL                              | tool:call       | tool:result      |
|                                                  |                 | (tool:error)     |
| invoke_agent, create_agent / AGENT               | agent:activated | agent:completed  |
|                                                  |                 | (agent:error)    |
| anything else                                    | span:start      | span:end         |

Signal ids are `otel:<trace id>:<span id>:start|end`, so a re-sent span is deduplicated, and
a span's parent link becomes the start signal's `source.parent` (the parent span's start
signal). The episode is, in order: the caller's explicit episode, the trace's
`gen_ai.conversation.id` / `session.id` (span or resource attribute, any span of the trace in
the request), else the trace id.

Episode attrs (`evalstream.*` attributes, and `agent_id` from the trace's outermost agent
span) go on the start signal of every span of the trace in the request, not only on the span
that carries them: suites select on them whichever span comes first. When the episode is the
trace, its root span (no parent) also ends it: a `harness:end` signal (id
`otel:<trace id>:<span id>:trace-end`) at the root's end time, so the episode closes after the
grace period instead of by inactivity. An episode named by a conversation, a session or the
caller spans several traces: no single root ends it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.codecs.otlp_decode import (
    DEFAULT_LIMITS,
    KIND_NAMES,
    Span,
    ValueLimits,
    decode_json,
    decode_protobuf,
)

JSON = Any
STATUS_OK, STATUS_ERROR = 1, 2
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})
EPISODE_KEYS = ("gen_ai.conversation.id", "session.id", "evalstream.episode_id")
# Span or resource attributes `evalstream.<name>` become episode attrs.
ATTR_NAMES = ("agent_id", "case_id", "variant", "run_id", "baseline_key", "model")
TRACE_END = ":trace-end"  # the id suffix of the end signal derived from a root span


def _str(value: JSON) -> str | None:
    return value if isinstance(value, str) and value else None


def _first(attrs: dict[str, JSON], *keys: str) -> JSON:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def _int(value: JSON) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and math.isfinite(value) and abs(value) < 1e18:
        return max(0, int(value))
    if isinstance(value, str) and value.isdigit() and len(value) < 19:
        return int(value)
    return None


def _maybe_json(value: JSON) -> JSON:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def classify(attrs: dict[str, JSON]) -> str:
    """llm, tool, agent or span."""
    op = attrs.get("gen_ai.operation.name")
    oi = attrs.get("openinference.span.kind")
    oi = oi.upper() if isinstance(oi, str) else None
    if op in LLM_OPERATIONS or oi in ("LLM", "EMBEDDING"):
        return "llm"
    if op == "execute_tool" or oi == "TOOL":
        return "tool"
    if op in AGENT_OPERATIONS or oi == "AGENT":
        return "agent"
    if op is None and oi is None and ("gen_ai.request.model" in attrs or "llm.model_name" in attrs):
        return "llm"
    return "span"


def _usage(attrs: dict[str, JSON]) -> dict[str, int] | None:
    inp = _int(
        _first(
            attrs,
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.prompt_tokens",
            "llm.token_count.prompt",
        )
    )
    out = _int(
        _first(
            attrs,
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.completion_tokens",
            "llm.token_count.completion",
        )
    )
    if inp is None and out is None:
        return None
    total = _int(_first(attrs, "gen_ai.usage.total_tokens", "llm.token_count.total"))
    usage = {
        "inputTokens": inp or 0,
        "outputTokens": out or 0,
        "totalTokens": total if total is not None else (inp or 0) + (out or 0),
    }
    cache_read = _int(
        _first(
            attrs,
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_read_input_tokens",
            "llm.token_count.prompt_details.cache_read",
        )
    )
    cache_write = _int(
        _first(
            attrs,
            "gen_ai.usage.cache_creation.input_tokens",
            "gen_ai.usage.cache_creation_input_tokens",
            "llm.token_count.prompt_details.cache_write",
        )
    )
    if cache_read:
        usage["cacheReadInputTokens"] = cache_read
    if cache_write:
        usage["cacheCreationInputTokens"] = cache_write
    return usage


def _genai_output(messages: JSON) -> tuple[str | None, list[dict[str, JSON]]]:
    """Text and tool calls of `gen_ai.output.messages` (role/parts messages)."""
    texts: list[str] = []
    calls: list[dict[str, JSON]] = []
    for message in messages if isinstance(messages, list) else []:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text" and isinstance(part.get("content"), str):
                texts.append(part["content"])
            elif part.get("type") == "tool_call":
                calls.append(
                    {
                        "id": part.get("id"),
                        "name": part.get("name"),
                        "input": _maybe_json(part.get("arguments")),
                    }
                )
    return ("".join(texts) if texts else None), calls


def _openinference_output(attrs: dict[str, JSON]) -> tuple[str | None, list[dict[str, JSON]]]:
    texts: list[str] = []
    calls: list[dict[str, JSON]] = []
    for i in range(64):
        prefix = f"llm.output_messages.{i}.message."
        content = attrs.get(prefix + "content")
        name0 = attrs.get(prefix + "tool_calls.0.tool_call.function.name")
        if content is None and name0 is None and prefix + "role" not in attrs:
            break
        if isinstance(content, str):
            texts.append(content)
        for j in range(64):
            call = f"{prefix}tool_calls.{j}.tool_call."
            name = attrs.get(call + "function.name")
            if name is None:
                break
            calls.append(
                {
                    "id": attrs.get(call + "id"),
                    "name": name,
                    "input": _maybe_json(attrs.get(call + "function.arguments")),
                }
            )
    if not texts:
        value = attrs.get("output.value")
        if isinstance(value, str) and attrs.get("output.mime_type") != "application/json":
            texts.append(value)
    return ("".join(texts) if texts else None), calls


def _stop_reason(attrs: dict[str, JSON]) -> JSON:
    reasons = attrs.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, list) and reasons:
        return reasons[0]
    return reasons if isinstance(reasons, str) else None


@dataclass(slots=True)
class _Mapped:
    start: Signal
    end: Signal


def _sid(span: Span, which: str) -> str:
    return f"otel:{span.trace_id}:{span.span_id}:{which}"


def _episode_of(spans: list[Span], episode_id: str | None) -> dict[str, str]:
    """trace id -> episode id, from any span of the trace that names a conversation."""
    by_trace: dict[str, str] = {}
    for span in spans:
        if span.trace_id in by_trace:
            continue
        value = _first(span.attrs, *EPISODE_KEYS) or _first(span.resource, *EPISODE_KEYS)
        if isinstance(value, str | int) and not isinstance(value, bool):
            by_trace[span.trace_id] = str(value)
    return {
        span.trace_id: episode_id or by_trace.get(span.trace_id) or span.trace_id for span in spans
    }


def _episode_attrs(
    spans: list[Span], kinds: list[str], agents: dict[tuple[str, str], str]
) -> dict[str, dict[str, JSON]]:
    """trace id -> attrs from `evalstream.*` attributes, and `agent_id` from the trace's
    outermost agent span in the request (an explicit `evalstream.agent_id` wins)."""
    out: dict[str, dict[str, JSON]] = {}
    for span in spans:
        attrs = out.setdefault(span.trace_id, {})
        for source in (span.resource, span.attrs):
            for name in ATTR_NAMES:
                value = source.get(f"evalstream.{name}")
                if isinstance(value, str) and value:
                    attrs[name] = value
    for trace_id, agent in _outermost_agents(spans, kinds, agents).items():
        out[trace_id].setdefault("agent_id", agent)
    return out


def _outermost_agents(
    spans: list[Span], kinds: list[str], agents: dict[tuple[str, str], str]
) -> dict[str, str]:
    """trace id -> the agent of its earliest agent span with no agent span above it among
    the spans of this request (an HTTP server span above it is not an agent)."""
    by_id = {(s.trace_id, s.span_id): (s, kind) for s, kind in zip(spans, kinds, strict=True)}
    best: dict[str, tuple[int, str]] = {}
    for span, kind in zip(spans, kinds, strict=True):
        agent = agents.get((span.trace_id, span.span_id))
        if kind != "agent" or agent is None:
            continue
        parent, hops = span.parent_span_id, 0
        while parent is not None and hops < 256:
            found = by_id.get((span.trace_id, parent))
            if found is None or found[1] == "agent":
                break
            parent, hops = found[0].parent_span_id, hops + 1
        outermost = parent is None or (span.trace_id, parent) not in by_id
        held = best.get(span.trace_id)
        if outermost and (held is None or span.start_ns < held[0]):
            best[span.trace_id] = (span.start_ns, agent)
    return {trace_id: agent for trace_id, (_, agent) in best.items()}


def _agents(spans: list[Span]) -> dict[tuple[str, str], str]:
    """(trace, span) -> agent name: the span's own `gen_ai.agent.name`, else its nearest
    ancestor's among the spans of this request."""
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    resolved: dict[tuple[str, str], str] = {}
    for span in spans:
        chain: list[tuple[str, str]] = []
        node: Span | None = span
        name: str | None = None
        while node is not None and len(chain) < 256:
            key = (node.trace_id, node.span_id)
            if key in resolved:
                name = resolved[key]
                break
            chain.append(key)
            own = _str(_first(node.attrs, "gen_ai.agent.name", "agent.name"))
            if own is not None:
                name = own
                break
            parent = node.parent_span_id
            node = by_id.get((node.trace_id, parent)) if parent else None
        if name is not None:
            for key in chain:
                resolved[key] = name
    return resolved


def spans_to_signals(spans: list[Span], *, episode_id: str | None = None) -> list[Signal]:
    """Signals of the spans, in event-time order (a start before its end)."""
    episodes = _episode_of(spans, episode_id)
    kinds = [classify(span.attrs) for span in spans]
    agents = _agents(spans)
    attrs_by_trace = _episode_attrs(spans, kinds, agents)
    out: list[tuple[float, int, Signal]] = []
    for order, (span, kind) in enumerate(zip(spans, kinds, strict=True)):
        agent = agents.get((span.trace_id, span.span_id))
        episode = episodes[span.trace_id]
        mapped = _map_span(span, kind, episode, agent, attrs_by_trace[span.trace_id])
        out.append((mapped.start.ts, 2 * order, mapped.start))
        out.append((mapped.end.ts, 2 * order + 1, mapped.end))
        if span.parent_span_id is None and episode == span.trace_id:
            # After every signal of its time: the trace's last word.
            out.append((mapped.end.ts, 2 * len(spans) + order, _trace_end(span, mapped)))
    out.sort(key=lambda item: (item[0], item[1]))
    return [sig for _, _, sig in out]


def span_count(signals: list[Signal]) -> int:
    """How many spans `spans_to_signals` mapped: two signals each, plus derived trace ends."""
    return sum(1 for s in signals if not s.id.endswith(TRACE_END)) // 2


def _trace_end(root: Span, mapped: _Mapped) -> Signal:
    """The end signal of a trace-scoped episode, derived from its root span's end."""
    end = mapped.end
    status = {STATUS_OK: "ok", STATUS_ERROR: "error"}.get(root.status_code, "unset")
    payload = {"durationMs": end.ts - mapped.start.ts, "span": root.name, "status": status}
    return Signal(
        _sid(root, TRACE_END[1:]),
        end.episode_id,
        "harness:end",
        end.ts,
        end.ts,
        None,
        None,
        end.id,
        None,
        payload,
        None,
    )


@dataclass(frozen=True, slots=True)
class _Facts:
    """What every kind's mapping needs to know about one span."""

    span: Span
    agent: str | None
    duration: float
    failed: bool
    error: str


Payloads = tuple[str, dict[str, JSON], str, dict[str, JSON]]  # start name/payload, end ...


def _llm(f: _Facts, provider: str | None) -> Payloads:
    a = f.span.attrs
    start = {
        "model": _first(a, "gen_ai.request.model", "llm.model_name", "gen_ai.response.model"),
        "provider": provider,
        "operation": a.get("gen_ai.operation.name"),
        "input": _maybe_json(_first(a, "gen_ai.input.messages", "input.value")),
    }
    if f.failed:
        error = {"error": f.error, "code": a.get("error.type"), "durationMs": f.duration}
        return "provider:start", start, "provider:error", error
    if "gen_ai.output.messages" in a:
        text, calls = _genai_output(_maybe_json(a["gen_ai.output.messages"]))
    else:
        text, calls = _openinference_output(a)
    output: dict[str, JSON] = {"content": text, "toolCalls": calls}
    usage = _usage(a)
    if usage is not None:
        output["usage"] = usage
    end: dict[str, JSON] = {
        "output": output,
        "durationMs": f.duration,
        "model": _first(a, "gen_ai.response.model", "gen_ai.request.model", "llm.model_name"),
    }
    stop = _stop_reason(a)
    if stop is not None:
        end["stopReason"] = stop
    cost = _first(a, "gen_ai.usage.cost", "llm.cost.total")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        end["costUsd"] = cost
    return "provider:start", start, "provider:end", end


def _tool(f: _Facts) -> Payloads:
    a = f.span.attrs
    name = _first(a, "gen_ai.tool.name", "tool.name") or f.span.name
    call_id = _first(a, "gen_ai.tool.call.id", "tool_call.id") or f.span.span_id
    arguments = _first(a, "gen_ai.tool.call.arguments", "tool.parameters", "input.value")
    start = {"id": call_id, "name": name, "input": _maybe_json(arguments)}
    if f.failed:
        error = {"id": call_id, "name": name, "error": f.error, "durationMs": f.duration}
        return "tool:call", start, "tool:error", error
    result = _maybe_json(_first(a, "gen_ai.tool.call.result", "output.value"))
    end = {"id": call_id, "name": name, "result": result, "durationMs": f.duration}
    return "tool:call", start, "tool:result", end


def _agent(f: _Facts) -> Payloads:
    name = f.agent or f.span.name
    start = {"agent": name, "operation": f.span.attrs.get("gen_ai.operation.name")}
    if f.failed:
        return (
            "agent:activated",
            start,
            "agent:error",
            {
                "agent": name,
                "error": f.error,
                "durationMs": f.duration,
            },
        )
    return "agent:activated", start, "agent:completed", {"agent": name, "durationMs": f.duration}


def _other(f: _Facts) -> Payloads:
    span = f.span
    start = {"name": span.name, "kind": KIND_NAMES.get(span.kind, "unspecified")}
    status = "error" if f.failed else ("ok" if span.status_code == STATUS_OK else "unset")
    end: dict[str, JSON] = {"name": span.name, "durationMs": f.duration, "status": status}
    if f.failed:
        end["error"] = f.error
    return "span:start", start, "span:end", end


def _map_span(
    span: Span, kind: str, episode: str, agent: str | None, attrs: dict[str, JSON]
) -> _Mapped:
    a = span.attrs
    start_ms = span.start_ns / 1e6
    end_ms = max(span.end_ns, span.start_ns) / 1e6
    error = span.status_message or span.exception or _str(a.get("error.type")) or "error"
    facts = _Facts(span, agent, end_ms - start_ms, span.status_code == STATUS_ERROR, error)
    provider = None
    if kind == "llm":
        provider = _str(
            _first(a, "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
        )
        start_name, start_payload, end_name, end_payload = _llm(facts, provider)
    elif kind == "tool":
        start_name, start_payload, end_name, end_payload = _tool(facts)
    elif kind == "agent":
        start_name, start_payload, end_name, end_payload = _agent(facts)
    else:
        start_name, start_payload, end_name, end_payload = _other(facts)
    episode_attrs = dict(attrs)
    parent = f"otel:{span.trace_id}:{span.parent_span_id}:start" if span.parent_span_id else None
    start_id = _sid(span, "start")
    start = Signal(
        start_id,
        episode,
        start_name,
        start_ms,
        start_ms,
        None,
        agent,
        parent,
        provider,
        start_payload,
        episode_attrs or None,
    )
    end = Signal(
        _sid(span, "end"),
        episode,
        end_name,
        end_ms,
        end_ms,
        None,
        agent,
        start_id,
        provider,
        end_payload,
        None,
    )
    return _Mapped(start, end)


def otlp_signals(
    body: bytes,
    *,
    json: bool,
    episode_id: str | None = None,
    limits: ValueLimits = DEFAULT_LIMITS,
) -> list[Signal]:
    """Decode one OTLP/HTTP traces body (already decompressed) into signals."""
    spans = decode_json(body, limits) if json else decode_protobuf(body, limits)
    return spans_to_signals(spans, episode_id=episode_id)
