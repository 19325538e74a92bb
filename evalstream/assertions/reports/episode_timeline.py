"""The drill-down of one episode id: its instances as timelines, from whatever records exist.

Evidence comes from the output records (`evalstream.episodes`, `.verdicts`, `.alerts`, or a
`check` results file) and, when available, the episode's signals. Nothing here reads a file or
a topic: `assemble_timeline` takes what a source found and builds, per instance of the id (an
id can open again after its episode closed; the records' `dedupe_key` names the instance by
its first signal id, `<episode_id>@<first signal id>`), the signals in arrival order with
their causal parent, each verdict next to the signal that decided it, scores and alerts.

JSON shape (`EpisodeTimeline.to_json`, `evalstream episode --format json`):

    {"episode_id", "source", "instances": [              # oldest first, newest last
        {"key", "first_signal", "status", "close_reason", "started_at", "ended_at",
         "attrs", "closed": bool,                          # false: no episode record (open?)
         "signals": [{"id", "name", "timestamp", "offset_ms", "seq", "agent", "parent",
                      "parent_name", "detail", "verdicts": [verdict...]}] | null,
         "verdicts": [{"suite", "index", "rule", "type", "verdict", "message",
                       "decided_at", "decided_at_time", "early"}],
         "scores": {...} | null, "alerts": [{...}]}]}
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalstream.assertions.evaluation.results import iso_ms
from evalstream.assertions.wire.signals import Signal, parse_timestamp

JSON = Any
SCORE_DIMENSIONS = ("correctness", "cost", "tool_match", "latency", "safety")
PASSING = "pass"


@dataclass
class EpisodeEvidence:
    """What a source found for one episode id (records in the order they were read)."""

    episode_id: str
    where: str  # a description of where it was looked for, for messages
    episodes: list[dict[str, JSON]] = field(default_factory=list)
    verdicts: list[dict[str, JSON]] = field(default_factory=list)
    alerts: list[dict[str, JSON]] = field(default_factory=list)
    signals: list[Signal] | None = None  # None: signals were not available at this source
    other_ids: list[str] = field(default_factory=list)  # a few other ids seen, for messages

    @property
    def empty(self) -> bool:
        return not (self.episodes or self.verdicts or self.alerts or self.signals)


DETAIL_CHARS = 160
DETAIL_KEYS = ("message", "error", "rule", "reason")  # what explains an error or a violation


def signal_detail(signal: Signal) -> str | None:
    """A short explanation from an error or policy signal's payload (None for the others):
    what an on-call engineer reads first, without dumping payloads."""
    if not (signal.name.endswith(":error") or signal.name == "policy:violation"):
        return None
    payload = signal.payload if isinstance(signal.payload, dict) else {}
    parts = [f"{k}={payload[k]}" for k in DETAIL_KEYS if payload.get(k) not in (None, "")]
    text = "; ".join(parts)
    if not text:
        return None
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


@dataclass
class TimelineSignal:
    signal: Signal
    offset_ms: float
    parent_name: str | None
    verdicts: list[dict[str, JSON]] = field(default_factory=list)

    def to_json(self) -> dict[str, JSON]:
        s = self.signal
        return {
            "id": s.id,
            "name": s.name,
            "timestamp": iso_ms(s.ts),
            "offset_ms": self.offset_ms,
            "seq": s.seq,
            "agent": s.agent,
            "parent": s.parent,
            "parent_name": self.parent_name,
            "detail": signal_detail(s),
            "verdicts": self.verdicts,
        }


@dataclass
class Instance:
    """One episode instance of the id: `key` is `<episode_id>@<first signal id>`."""

    key: str
    first_signal: str | None
    record: dict[str, JSON] | None = None
    verdicts: list[dict[str, JSON]] = field(default_factory=list)
    alerts: list[dict[str, JSON]] = field(default_factory=list)
    signals: list[TimelineSignal] | None = None

    @property
    def status(self) -> str:
        if self.record is not None:
            return str(self.record.get("status"))
        return "open" if self.verdicts or self.signals else "unknown"

    @property
    def start_sort_key(self) -> str:
        if self.record is not None and self.record.get("started_at"):
            return str(self.record["started_at"])
        if self.signals:
            return iso_ms(self.signals[0].signal.ts) or ""
        times = [str(v["decided_at_time"]) for v in self.verdicts if v.get("decided_at_time")]
        return min(times, default="")

    def at_close(self) -> list[dict[str, JSON]]:
        """Verdicts decided at close, or by a signal not in the timeline."""
        shown = {s.signal.id for s in self.signals or ()}
        return [v for v in self.verdicts if v.get("decided_at") not in shown]

    def to_json(self) -> dict[str, JSON]:
        record = self.record or {}
        return {
            "key": self.key,
            "first_signal": self.first_signal,
            "status": self.status,
            "closed": self.record is not None,
            "close_reason": record.get("close_reason"),
            "started_at": record.get("started_at"),
            "ended_at": record.get("ended_at"),
            "attrs": record.get("attrs") or {},
            "signals": None if self.signals is None else [s.to_json() for s in self.signals],
            "verdicts": self.verdicts,
            "scores": record.get("scores"),
            "alerts": self.alerts,
        }


@dataclass
class EpisodeTimeline:
    episode_id: str
    source: str
    instances: list[Instance]

    def to_json(self) -> dict[str, JSON]:
        return {
            "episode_id": self.episode_id,
            "source": self.source,
            "instances": [i.to_json() for i in self.instances],
        }


def _instance_of(episode_id: str, dedupe_key: str, suffix: str = "") -> str | None:
    """The first signal id in `<episode_id>@<first>[suffix]`; None for a key without one."""
    prefix = f"{episode_id}@"
    if not dedupe_key.startswith(prefix) or not dedupe_key.endswith(suffix):
        return None
    return dedupe_key[len(prefix) : len(dedupe_key) - len(suffix)] or None


def _verdict_view(
    verdict: dict[str, JSON], extra: dict[str, JSON] | None = None
) -> dict[str, JSON]:
    extra = extra or {}
    return {
        "suite": verdict.get("suite"),
        "index": verdict.get("index"),
        "rule": verdict.get("rule"),
        "type": verdict.get("type"),
        "verdict": verdict.get("verdict"),
        "message": verdict.get("message"),
        "decided_at": verdict.get("decided_at"),
        "decided_at_time": verdict.get("decided_at_time", extra.get("decided_at_time")),
        "early": verdict.get("early", extra.get("early")),
    }


def _first_by_key(records: Iterable[dict[str, JSON]]) -> list[dict[str, JSON]]:
    """At-least-once delivery repeats records: keep the first of each dedupe key."""
    seen: set[str] = set()
    out = []
    for record in records:
        key = str(record.get("dedupe_key"))
        if key not in seen:
            seen.add(key)
            out.append(record)
    return out


def assemble_timeline(evidence: EpisodeEvidence) -> EpisodeTimeline:
    """Every instance of the id, oldest first; each with its records, verdicts and signals."""
    eid = evidence.episode_id
    instances: dict[str, Instance] = {}

    def instance(first: str | None) -> Instance:
        key = eid if first is None else f"{eid}@{first}"
        if key not in instances:
            instances[key] = Instance(key, first)
        return instances[key]

    for record in _first_by_key(r for r in evidence.episodes if r.get("episode_id") == eid):
        inst = instance(_instance_of(eid, str(record.get("dedupe_key", ""))))
        inst.record = record
    verdict_records: dict[str, dict[tuple[JSON, JSON], dict[str, JSON]]] = {}
    for v in _first_by_key(r for r in evidence.verdicts if r.get("episode_id") == eid):
        suffix = f"/{v.get('suite')}/{v.get('index')}/{v.get('rule')}"
        inst = instance(_instance_of(eid, str(v.get("dedupe_key", "")), suffix))
        verdict_records.setdefault(inst.key, {})[(v.get("suite"), v.get("index"))] = v
    for inst in instances.values():
        published = verdict_records.get(inst.key, {})
        if inst.record is not None:  # the record's assertions are the complete final list
            inst.verdicts = [
                _verdict_view(a, published.get((a.get("suite"), a.get("index"))))
                for a in inst.record.get("assertions") or []
            ]
        else:
            inst.verdicts = [_verdict_view(v) for v in published.values()]
    for alert in _first_by_key(a for a in evidence.alerts if a.get("episode_id") == eid):
        suffix = f"/{alert.get('dimension')}"
        instance(_instance_of(eid, str(alert.get("dedupe_key", "")), suffix)).alerts.append(alert)
    for inst in instances.values():
        # The episode record repeats its alerts (keyed without the instance): one per dimension.
        dimensions = {a.get("dimension") for a in inst.alerts}
        for alert in (inst.record or {}).get("alerts") or []:
            if alert.get("dimension") not in dimensions:
                inst.alerts.append(alert)
    if evidence.signals is not None:
        _attach_signals(eid, evidence.signals, instances, instance)
    ordered = sorted(instances.values(), key=lambda i: i.start_sort_key)
    return EpisodeTimeline(eid, evidence.where, ordered)


def _attach_signals(
    eid: str,
    signals: Sequence[Signal],
    instances: dict[str, Instance],
    instance: Callable[[str | None], Instance],
) -> None:
    """Split the id's signals (arrival order) into instances at each instance's first signal;
    signals before any known first signal start an instance of their own (not yet closed,
    or closed outside what was read), or join a record that names no instance."""
    known_firsts = {i.first_signal for i in instances.values() if i.first_signal}
    # Records that do not name their instance (a `check` results file) take the signals
    # that start no known instance, in order.
    unnamed = [i for i in instances.values() if i.first_signal is None and i.record is not None]
    current: Instance | None = None
    seen: set[str] = set()
    for sig in signals:
        if sig.episode_id != eid:
            continue
        if sig.id in known_firsts or current is None:
            started = _recorded_span(instances.values(), sig.ts)
            if sig.id not in known_firsts and started is not None:
                current = started  # the window starts inside this instance
            elif sig.id not in known_firsts and unnamed:
                current = unnamed.pop(0)
                current.first_signal, current.key = sig.id, f"{eid}@{sig.id}"
            else:
                current = instance(sig.id)
            current.signals = []
            seen = set()
        if sig.id in seen:  # a redelivered duplicate: the evaluators dropped it too
            continue
        seen.add(sig.id)
        assert current.signals is not None
        current.signals.append(TimelineSignal(sig, 0.0, None))
    for inst in instances.values():
        if inst.signals is None:
            continue
        names = {s.signal.id: s.signal.name for s in inst.signals}
        # Offsets from the episode's start, also when the window cut its first signals.
        start = inst.signals[0].signal.ts if inst.signals else 0.0
        with contextlib.suppress(ValueError):  # no record, or no start time in it
            start = parse_timestamp((inst.record or {}).get("started_at"))
        by_signal: dict[str, list[dict[str, JSON]]] = {}
        for v in inst.verdicts:
            if v.get("decided_at") is not None:
                by_signal.setdefault(str(v["decided_at"]), []).append(v)
        for s in inst.signals:
            s.offset_ms = s.signal.ts - start
            s.parent_name = names.get(s.signal.parent) if s.signal.parent else None
            s.verdicts = by_signal.get(s.signal.id, [])


def _recorded_span(instances: Iterable[Instance], ts: float) -> Instance | None:
    """The recorded instance whose [started_at, ended_at] holds `ts`, if any."""
    for inst in instances:
        record = inst.record or {}
        try:
            start = parse_timestamp(record.get("started_at"))
            end = parse_timestamp(record.get("ended_at"))
        except ValueError:
            continue
        if inst.first_signal and start <= ts <= end:
            return inst
    return None


# --- text -----------------------------------------------------------------------------------


def _mark(verdict: JSON) -> str:
    return {"pass": "ok  ", "fail": "FAIL", "error": "ERR ", "pending": "PEND"}.get(
        str(verdict), str(verdict).upper()
    )


def _verdict_line(v: dict[str, JSON]) -> str:
    early = " (early)" if v.get("early") else ""
    where = f"{v.get('suite')}#{v.get('index')} {v.get('type')}"
    return f"{_mark(v.get('verdict'))} {where}{early}: {v.get('message')}"


def _pct(value: JSON, unbounded: JSON) -> str:
    if unbounded:
        return "Δ unbounded rise"
    return "Δ n/a" if value is None else f"Δ {value:+.1f}%"


def _score(value: JSON) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def render_text(timeline: EpisodeTimeline) -> str:
    """The drill-down for a terminal: one block per instance, newest last."""
    lines: list[str] = []
    total = len(timeline.instances)
    lines.append(f"episode {timeline.episode_id}: {total} instance(s) in {timeline.source}")
    for n, inst in enumerate(timeline.instances, start=1):
        lines.extend(_render_instance(inst, n, total))
    return "\n".join(lines) + "\n"


def _render_instance(inst: Instance, n: int, total: int) -> list[str]:
    record = inst.record or {}
    out = ["", f"== instance {n}/{total}: {inst.key}"]
    if inst.record is None:
        out.append("   no episode record: the episode is still open, or closed outside the window")
    else:
        out.append(
            f"   status {record.get('status')} · closed by {record.get('close_reason')} · "
            f"{record.get('signals')} signals · {record.get('started_at')} → "
            f"{record.get('ended_at')}"
        )
        attrs = record.get("attrs") or {}
        if attrs:
            out.append("   attrs " + " ".join(f"{k}={attrs[k]}" for k in sorted(attrs)))
    if inst.signals is not None:
        out.append("   signals:")
        for s in inst.signals:
            sig = s.signal
            agent = f" [{sig.agent}]" if sig.agent else ""
            parent = ""
            if sig.parent:
                parent = f"  ← {s.parent_name or '?'} {sig.parent}"
            offset = f"+{s.offset_ms / 1000:.3f}s"
            out.append(f"   {offset:>10}  {sig.name}{agent}  {sig.id}{parent}")
            out.extend(
                f"               {_verdict_line(v)}" for v in s.verdicts if v["verdict"] != PASSING
            )
            if (detail := signal_detail(sig)) is not None:
                out.append(f"               payload: {detail}")
    else:
        out.append("   signals: not available here (verdicts name their deciding signal)")
    closing = [v for v in inst.at_close() if v["verdict"] != PASSING]
    if closing:
        out.append("   decided at close or by a signal not shown:")
        for v in closing:
            at = f" (at {v['decided_at']})" if v.get("decided_at") else ""
            out.append(f"     {_verdict_line(v)}{at}")
    passed = [v for v in inst.verdicts if v["verdict"] == PASSING]
    out.append(f"   assertions: {len(inst.verdicts)}, {len(passed)} passed")
    scores = record.get("scores")
    if isinstance(scores, dict):
        out.append(
            f"   scores vs baseline {scores.get('baseline') or '(none)'}: overall "
            f"{_score(scores.get('overall'))}"
        )
        parts = [f"{d} {_score(scores.get(d))}" for d in SCORE_DIMENSIONS]
        out.append("     " + " · ".join(parts))
        out.append(
            f"     cost {_pct(scores.get('cost_delta_pct'), scores.get('cost_rise_unbounded'))}"
            f" · latency "
            f"{_pct(scores.get('latency_delta_pct'), scores.get('latency_rise_unbounded'))}"
        )
    for alert in inst.alerts:
        out.append(
            f"   ALERT {str(alert.get('severity')).upper()} {alert.get('dimension')}: "
            f"{alert.get('message')}"
        )
    return out
