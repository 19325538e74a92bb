"""Verdicts and scores as `gen_ai.evaluation.result` events (OpenTelemetry GenAI semantic
conventions).

One event per verdict record (an early verdict when it is decided, the others at close),
named `<suite>/<assertion index>/<type>`, and one per score of a closed, scored episode
(`score.<dimension>`, `score.overall`).
Every event names the span it evaluates (`trace_id`, `parent_span_id`), found in this order:

1. the deciding signal, when it was mapped from an OTLP span: its id is
   `otel:<trace id>:<span id>:…` (evalstream/connectors/codecs/otlp_genai.py), so the verdict hangs
   under the very span (the tool call, the LLM call) that decided it;
2. the episode's first signal, when it came from OTLP: the trace's earliest span, its root
   for a trace-scoped episode (verdicts decided at close, scores);
3. the episode's own `trace_id` (and `span_id`) attributes, when they are W3C ids;
4. otherwise ids derived from the episode instance (SHA-256), the same on every run, so the
   events of one episode share one trace even when its signals never went through OTLP.

Records are the pipeline's output records (`verdict_record`, `episode_record`); a record that
lacks what an event needs yields no event rather than an exception.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

JSON = Any
EVENT_NAME = "gen_ai.evaluation.result"
NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
ERROR_TYPE = "error.type"
OTHER_ERROR = "_OTHER"  # the conventions' value when no better type is known
SCORE_NAMES = ("correctness", "cost", "tool_match", "latency", "safety", "overall")
MAX_EXPLANATION_CHARS = 4_096
VERDICT_VALUES = {"pass": 1.0, "fail": 0.0}
_OTLP_ID = re.compile(r"otel:([0-9a-f]{32}):([0-9a-f]{16})(?::|$)")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")
_ERROR_TYPE = re.compile(r"([A-Za-z_][\w.]{0,127}): ")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
_VERDICT_FIELDS = (
    ("suite", "evalstream.suite"),
    ("type", "evalstream.assertion.type"),
    ("index", "evalstream.assertion.index"),
    ("early", "evalstream.early"),
    ("rule", "evalstream.rule"),
    ("decided_at", "evalstream.decided_at"),
)


@dataclass(frozen=True, slots=True)
class EvaluationEvent:
    """One `gen_ai.evaluation.result` event and the span it evaluates.

    `key` is stable for the same record (the record's dedupe key, plus the score's name), and
    `span_id` is the event's own id when it is exported as a span, derived from `key`."""

    key: str
    trace_id: str  # 32 lower-case hex digits
    parent_span_id: str  # 16 lower-case hex digits: the evaluated span
    span_id: str
    time_ns: int
    attributes: dict[str, str | int | float | bool]
    error: bool  # the evaluation itself errored (`error.type` is set)


@dataclass(frozen=True, slots=True)
class SpanRef:
    trace_id: str
    span_id: str


def verdict_event(record: dict[str, JSON], now_ns: int) -> EvaluationEvent | None:
    """The event of one verdict record (`evalstream/assertions/evaluation/records.py`)."""
    episode_id = record.get("episode_id")
    verdict = record.get("verdict")
    if not isinstance(episode_id, str) or not isinstance(verdict, str):
        return None
    name = assertion_name(record)
    key = str(record.get("dedupe_key") or f"{episode_id}/{name}")
    instance = _instance(key, episode_id)
    decided_at = record.get("decided_at")
    parent = (
        _otlp_span(decided_at)
        or _otlp_span(instance)
        or _attrs_span(record.get("attrs"), episode_id, instance)
        or derived_span(episode_id, instance)
    )
    attrs = _common(record, episode_id, record.get("agent_id"), record.get("variant"))
    attrs[NAME] = name
    attrs[SCORE_LABEL] = verdict
    value = VERDICT_VALUES.get(verdict)
    if value is not None:
        attrs[SCORE_VALUE] = value
    message = record.get("message")
    if isinstance(message, str) and message:
        attrs[EXPLANATION] = message[:MAX_EXPLANATION_CHARS]
    errored = verdict == "error"
    if errored:
        attrs[ERROR_TYPE] = error_type(message if isinstance(message, str) else "")
    for field, attr in _VERDICT_FIELDS:
        field_value = record.get(field)
        if isinstance(field_value, (str, int)) and field_value != "":  # bool is an int
            attrs[attr] = field_value
    when = _iso_ns(record.get("decided_at_time")) or now_ns
    return _event(key, parent, when, attrs, errored)


def score_events(record: dict[str, JSON], now_ns: int) -> list[EvaluationEvent]:
    """One event per score of a scored episode record (none without `scores`)."""
    scores = record.get("scores")
    episode_id = record.get("episode_id")
    if not isinstance(scores, dict) or not isinstance(episode_id, str):
        return []
    key = str(record.get("dedupe_key") or episode_id)
    instance = _instance(key, episode_id)
    attrs_in = _dict(record.get("attrs"))
    parent = (
        _otlp_span(instance)
        or _attrs_span(attrs_in, episode_id, instance)
        or derived_span(episode_id, instance)
    )
    when = _iso_ns(record.get("ended_at")) or now_ns
    base = _common(record, episode_id, attrs_in.get("agent_id"), attrs_in.get("variant"))
    baseline = scores.get("baseline")
    if isinstance(baseline, str) and baseline:
        base["evalstream.baseline"] = baseline
    suites = record.get("suites")
    if isinstance(suites, list) and suites and all(isinstance(s, str) for s in suites):
        base["evalstream.suite"] = ",".join(suites)
    notes = scores.get("notes")
    explanation = (
        "; ".join(n for n in notes if isinstance(n, str)) if isinstance(notes, list) else ""
    )
    out = []
    for dimension in SCORE_NAMES:
        value = scores.get(dimension)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        attrs = dict(base)
        attrs[NAME] = f"score.{dimension}"
        attrs[SCORE_VALUE] = float(value)
        if explanation:
            attrs[EXPLANATION] = explanation[:MAX_EXPLANATION_CHARS]
        out.append(_event(f"{key}/score.{dimension}", parent, when, attrs, False))
    return out


def episode_events(
    record: dict[str, JSON], now_ns: int, *, with_early: bool = True
) -> list[EvaluationEvent]:
    """The verdicts of a closed episode record, then its scores. `with_early=False` leaves
    out the verdicts decided before the close (already exported when they were decided)."""
    episode_id = record.get("episode_id")
    assertions = record.get("assertions")
    if not isinstance(episode_id, str) or not isinstance(assertions, list):
        return []
    attrs = _dict(record.get("attrs"))
    key = str(record.get("dedupe_key") or episode_id)
    out: list[EvaluationEvent] = []
    for outcome in assertions:
        if not isinstance(outcome, dict):
            continue
        early = outcome.get("decided_at") is not None
        if early and not with_early:
            continue
        verdict = {
            **outcome,
            "dedupe_key": f"{key}/{outcome.get('suite')}/{outcome.get('index')}/"
            f"{outcome.get('rule')}",
            "episode_id": episode_id,
            "case_id": record.get("case_id"),
            "agent_id": attrs.get("agent_id"),
            "variant": attrs.get("variant"),
            "early": early,
            "attrs": attrs,
            "decided_at_time": record.get("ended_at"),  # the record keeps no decision time
        }
        event = verdict_event(verdict, now_ns)
        if event is not None:
            out.append(event)
    return out + score_events(record, now_ns)


def assertion_name(record: dict[str, JSON]) -> str:
    """`<suite>/<index>/<type>`: the assertion within its suite, readable in a backend's
    list of evaluations (the rule's version hash is `evalstream.rule`)."""
    return f"{record.get('suite')}/{record.get('index')}/{record.get('type')}"


def error_type(message: str) -> str:
    """A low-cardinality type for an errored assertion: the exception's class name of an
    `ExceptionType: message` message, else `_OTHER`."""
    match = _ERROR_TYPE.match(message)
    return match.group(1) if match else OTHER_ERROR


@lru_cache(maxsize=4096)  # an episode's verdicts and scores ask in turn
def derived_span(episode_id: str, instance: str | None) -> SpanRef:
    """A deterministic trace and span for an episode that names none."""
    seed = episode_id if instance is None else f"{episode_id}@{instance}"
    digest = hashlib.sha256(b"evalstream-episode\0" + seed.encode("utf-8", "replace")).hexdigest()
    return SpanRef(_nonzero(digest[:32], _ZERO_TRACE), _nonzero(digest[32:48], _ZERO_SPAN))


def _event(
    key: str,
    parent: SpanRef,
    when: int,
    attrs: dict[str, str | int | float | bool],
    errored: bool,
) -> EvaluationEvent:
    digest = hashlib.sha256(b"evalstream-evaluation\0" + key.encode("utf-8", "replace"))
    span_id = _nonzero(digest.hexdigest()[:16], _ZERO_SPAN)
    return EvaluationEvent(key, parent.trace_id, parent.span_id, span_id, when, attrs, errored)


def _common(
    record: dict[str, JSON], episode_id: str, agent: JSON, variant: JSON
) -> dict[str, str | int | float | bool]:
    attrs: dict[str, str | int | float | bool] = {"evalstream.episode_id": episode_id}
    for value, attr in (
        (agent, "evalstream.agent_id"),
        (variant, "evalstream.variant"),
        (record.get("case_id"), "evalstream.case_id"),
        (record.get("dedupe_key"), "evalstream.dedupe_key"),
    ):
        if isinstance(value, str) and value:
            attrs[attr] = value
    return attrs


def _dict(value: JSON) -> dict[str, JSON]:
    return value if isinstance(value, dict) else {}


def _instance(key: str, episode_id: str) -> str | None:
    """The episode instance (its first signal's id) a dedupe key names, if any."""
    prefix = f"{episode_id}@"
    if not key.startswith(prefix):
        return None
    return key[len(prefix) :].split("/", 1)[0]  # cut at the suite: OTLP ids have no `/`


def _otlp_span(signal_id: JSON) -> SpanRef | None:
    if not isinstance(signal_id, str):
        return None
    match = _OTLP_ID.match(signal_id)
    if match is None or match.group(1) == _ZERO_TRACE or match.group(2) == _ZERO_SPAN:
        return None
    return SpanRef(match.group(1), match.group(2))


def _attrs_span(attrs: JSON, episode_id: str, instance: str | None) -> SpanRef | None:
    """The episode's `trace_id` / `span_id` attributes, when they are W3C ids; a trace id
    alone gets a span id derived from the episode."""
    if not isinstance(attrs, dict):
        return None
    trace = attrs.get("trace_id")
    trace = trace.lower().replace("-", "") if isinstance(trace, str) else ""
    if not _TRACE_ID.fullmatch(trace) or trace == _ZERO_TRACE:
        return None
    span = attrs.get("span_id")
    span = span.lower() if isinstance(span, str) else ""
    if _SPAN_ID.fullmatch(span) and span != _ZERO_SPAN:
        return SpanRef(trace, span)
    return SpanRef(trace, derived_span(episode_id, instance).span_id)


def _iso_ns(value: JSON) -> int | None:
    if not isinstance(value, str) or not value:
        return None
    if len(value) == 24 and value[19] == "." and value[23] == "Z" and value[20:23].isdigit():
        seconds = _iso_seconds(value[:19])  # records' own spelling (`iso_ms`): cached
        if seconds is not None:
            return (seconds * 1_000 + int(value[20:23])) * 1_000_000
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return round(parsed.timestamp() * 1_000_000) * 1_000


@lru_cache(maxsize=4096)
def _iso_seconds(prefix: str) -> int | None:
    try:
        return int(datetime.fromisoformat(prefix + "+00:00").timestamp())
    except ValueError:
        return None


def _nonzero(hex_id: str, zero: str) -> str:
    """All-zero ids are invalid in OTLP: one bit set instead (probability 2^-64 or less)."""
    return hex_id if hex_id != zero else zero[:-1] + "1"
