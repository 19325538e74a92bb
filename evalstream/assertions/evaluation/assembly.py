"""Episode assembly: open, deduplicate, order, evaluate and close episodes (DESIGN §3).

Clock-agnostic: every call takes `now` in epoch milliseconds. Offline runs pass event time
(the watermark of the input), live runtimes pass wall-clock time; the rules are the same.

Close reasons: `ended` (an end signal, after the grace period), `timed_out` (inactivity),
`truncated` (max duration or max signals), `end_of_input` (offline input ran out first),
`error` (feeding or closing it raised: the episode is reported with status `error`, and every
other episode goes on).

Suite selection waits for the attributes that decide it: attributes merge across an
episode's signals, and the one carrying `agent_id` (an OTel trace's agent span, say) need not
come first. While a `SelectionRule` still awaits attributes, the episode's signals are kept
(at most `selection_buffer` of them); the plan is chosen when nothing is awaited any more,
when the buffer is full, or when the episode closes, and the kept signals are then evaluated
in order (early verdicts keep the signal that decided them).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any, Protocol

from evalstream.assertions.evaluation.engine import EpisodeEvaluation, PendingJudgement, Plan
from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.results import (
    EpisodeResult,
    describe_error,
    error_result,
)
from evalstream.assertions.wire.patterns import compile_pattern
from evalstream.assertions.wire.pricing import PricingTable, default_pricing
from evalstream.assertions.wire.signals import Signal

JSON = Any


class CloseReason(StrEnum):
    ENDED = "ended"
    TIMED_OUT = "timed_out"
    TRUNCATED = "truncated"
    END_OF_INPUT = "end_of_input"
    ERROR = "error"


class Accept(IntEnum):
    ACCEPTED = 0
    DUPLICATE = 1
    LATE = 2


@dataclass(frozen=True)
class CloseRules:
    end_patterns: tuple[str, ...] = ("harness:end",)
    grace_ms: float = 2_000.0
    inactivity_ms: float = 300_000.0
    max_duration_ms: float | None = 6 * 3_600_000.0
    max_signals: int | None = 1_000_000
    reorder_ms: float = 0.0  # 0: arrival order
    # Duplicates are detected among the last `dedupe_window` signals this assembler accepted
    # (keyed by episode id and signal id): one fixed-size window for all episodes, so the
    # memory of an open episode does not depend on deduplication at all.
    dedupe_window: int = 65_536
    # Signals an episode keeps while its suite selection awaits attributes (see the module
    # docstring); at the bound the selection is made with the attributes seen so far.
    selection_buffer: int = 1_024

    def __post_init__(self) -> None:
        for name in ("grace_ms", "inactivity_ms", "reorder_ms", "selection_buffer"):
            if getattr(self, name) < 0:
                raise ValueError(f"close rule `{name}` must be >= 0")
        if self.inactivity_ms == 0:
            raise ValueError("close rule `inactivity_ms` must be > 0")
        if self.dedupe_window < 1:
            raise ValueError("close rule `dedupe_window` must be >= 1")


class OpenEpisode:
    __slots__ = (
        "attrs",
        "awaiting",
        "duplicates",
        "end_deadline",
        "episode_id",
        "evaluation",
        "first_signal_id",
        "last_seen",
        "notes",
        "opened_at",
        "reorder",
        "seq",
        "signals",
        "truncate",
    )

    def __init__(
        self,
        episode_id: str,
        evaluation: EpisodeEvaluation,
        attrs: dict[str, JSON],
        now: float,
        seq: int = 0,
        *,
        first_signal_id: str = "",
    ) -> None:
        self.seq = seq  # open order, which `due` lists episodes in
        self.episode_id = episode_id
        # Names this instance of the episode id (an id may open again after it closed).
        self.first_signal_id = first_signal_id
        self.evaluation = evaluation
        self.attrs = attrs
        self.opened_at = now
        self.last_seen = now
        self.signals = 0
        self.duplicates = 0
        self.end_deadline: float | None = None
        self.reorder: list[tuple[float, int, int, Signal]] | None = None
        self.truncate = False
        # Signals kept while the suite selection awaits attributes; None once selected.
        self.awaiting: list[Signal] | None = None
        self.notes: list[str] = []


@dataclass
class ClosedEpisode:
    episode: OpenEpisode
    reason: CloseReason
    pending: list[PendingJudgement]
    error: str | None = None  # what raised while feeding or closing it (`describe_error`)

    @property
    def evaluation(self) -> EpisodeEvaluation:
        return self.episode.evaluation

    def result(self) -> EpisodeResult:
        ep = self.episode
        ev = ep.evaluation
        facts = ev.facts
        case_id = ep.attrs.get("case_id")
        return EpisodeResult(
            episode_id=ep.episode_id,
            case_id=case_id if isinstance(case_id, str) else None,
            close_reason=self.reason.value,
            signals=ep.signals,
            duplicates=ep.duplicates,
            assertions=ev.results(),
            metrics=facts.metrics(),
            attrs=dict(ep.attrs),
            suites=sorted({a.suite for a in ev.plan.assertions}),
            started_ts=facts.started_ts,
            ended_ts=facts.ended_ts,
            output=facts.output(),
            notes=list(ep.notes),
        )

    def report(self) -> EpisodeResult:
        """`result()`, checked to render; an `error_result` when building or rendering it
        raises (the exception is described in `error`)."""
        if self.error is None:
            try:
                result = self.result()
                result.to_json()
            except Exception as exc:  # any failure is this episode's alone
                self.error = describe_error(exc)
            else:
                return result
        return self.error_result()

    def error_result(self) -> EpisodeResult:
        """The episode as status `error`: only what cannot fail to render (its id, case,
        close reason, counts, attributes), none of its evaluation."""
        ep = self.episode
        case_id = ep.attrs.get("case_id")
        return error_result(
            ep.episode_id,
            case_id=case_id if isinstance(case_id, str) else None,
            close_reason=self.reason.value,
            signals=ep.signals,
            duplicates=ep.duplicates,
            attrs=ep.attrs,
            error=self.error or "the episode could not be reported",
        )


@dataclass(slots=True)  # not frozen: one per early verdict, and a frozen __init__ is slower
class EarlyVerdict:
    episode: OpenEpisode
    top_index: int
    signal: Signal


PlanSelector = Callable[[str, dict[str, JSON]], Plan]


class SelectionRule(Protocol):
    """When a plan can be selected, and why an episode got none (`SuiteSet` is one)."""

    def awaited(self, episode_id: str, attrs: dict[str, JSON]) -> tuple[str, ...]:
        """Attributes absent from `attrs` that could still change the selection."""
        ...

    def unselected_reason(self, episode_id: str, attrs: dict[str, JSON]) -> str | None:
        """Why no assertion applies to an episode with `attrs` (None: nothing to say)."""
        ...


def _open_order(ep: OpenEpisode) -> int:
    return ep.seq


class EpisodeAssembler:
    def __init__(
        self,
        select_plan: PlanSelector,
        rules: CloseRules | None = None,
        pricing: PricingTable | None = None,
        closed_memory: int = 100_000,
        *,
        selection: SelectionRule | None = None,
    ) -> None:
        """`selection`: defer the plan until the attributes that decide it are seen (without
        it, the plan is selected on the first signal's attributes)."""
        self.select_plan = select_plan
        self.selection = selection
        self.rules = rules or CloseRules()
        self.pricing = pricing or default_pricing()
        self.open: dict[str, OpenEpisode] = {}
        self.closed_ids: dict[str, None] = {}  # insertion-ordered: oldest first
        self.closed_memory = closed_memory
        self.ready: list[ClosedEpisode] = []  # drained by the caller
        self.early: list[EarlyVerdict] = []  # drained by the caller
        self._end_cache: dict[str, bool] = {}
        self._end_patterns = [compile_pattern(p) for p in self.rules.end_patterns]
        self._tiebreak = itertools.count()
        self.duplicates = 0
        self.late = 0
        self._recent: set[int] = set()
        self._ring: deque[int] = deque()
        # Read for every signal: kept here, not behind `self.rules.`.
        self._dedupe_window = self.rules.dedupe_window
        self._max_signals = self.rules.max_signals
        self._inactivity_ms = self.rules.inactivity_ms
        # `due` without a scan of every open episode: the ones waiting out their grace
        # period, and a time before which no open episode can be inactive or over its
        # maximum duration (lowered whenever an episode's clock could make it earlier).
        self.ending: dict[str, OpenEpisode] = {}
        self._scan_at = float("-inf")
        self._opened = itertools.count()
        self._buffer = self.rules.selection_buffer
        self._undecided = Plan([])

    def is_end(self, name: str) -> bool:
        found = self._end_cache.get(name)
        if found is None:
            found = any(p.matches(name) for p in self._end_patterns)
            if len(self._end_cache) > 8192:
                self._end_cache.clear()
            self._end_cache[name] = found
        return found

    def feed(self, sig: Signal, now: float) -> Accept:
        episode_id = sig.episode_id
        ep = self.open.get(episode_id)
        if ep is None:
            if episode_id in self.closed_ids:
                self.late += 1
                return Accept.LATE
            ep = self._open(sig, now)
        key = hash((episode_id, sig.id))
        recent = self._recent
        if key in recent:
            ep.duplicates += 1
            self.duplicates += 1
            return Accept.DUPLICATE
        ring = self._ring
        if len(ring) >= self._dedupe_window:
            recent.discard(ring.popleft())
        ring.append(key)
        recent.add(key)
        if now < ep.last_seen:  # a clock that went back: the episode may time out sooner
            ep.last_seen = now
            self._scan_at = min(self._scan_at, self._scan_deadline(ep))
        ep.last_seen = now
        ep.signals += 1
        if sig.attrs:
            ep.attrs.update(sig.attrs)
        try:
            if ep.reorder is None:
                self._evaluate(ep, sig, now)
            else:
                heapq.heappush(ep.reorder, (sig.ts, sig.seq or 0, next(self._tiebreak), sig))
                self._release(ep, now, final=False)
            kept = ep.awaiting
            if kept is not None and (sig.attrs or len(kept) >= self._buffer):
                self._select_when_decided(ep)
        except Exception as exc:  # this episode's alone: it closes as `error`, others go on
            self._close(ep, CloseReason.ERROR, describe_error(exc))
            return Accept.ACCEPTED
        if ep.end_deadline is not None and ep.end_deadline <= now:
            self._close(ep, CloseReason.ENDED)  # zero grace: the end signal closes at once
            return Accept.ACCEPTED
        if self._max_signals is not None and ep.signals >= self._max_signals:
            self._close(ep, CloseReason.TRUNCATED)
        return Accept.ACCEPTED

    def _open(self, sig: Signal, now: float) -> OpenEpisode:
        attrs = dict(sig.attrs) if sig.attrs else {}
        selection = self.selection
        if selection is not None and self._buffer and selection.awaited(sig.episode_id, attrs):
            plan = self._undecided  # evaluates nothing until `_select` replaces it
            kept: list[Signal] | None = []
        else:
            plan = self.select_plan(sig.episode_id, attrs)
            kept = None
        facts = self._facts(attrs)
        ep = OpenEpisode(
            sig.episode_id,
            plan.start(facts),
            attrs,
            now,
            next(self._opened),
            first_signal_id=sig.id,
        )
        ep.awaiting = kept
        if kept is None:
            self._note_unselected(ep, plan, "")
        self._scan_at = min(self._scan_at, self._scan_deadline(ep))
        if self.rules.reorder_ms > 0:
            ep.reorder = []
        self.open[sig.episode_id] = ep
        return ep

    def _facts(self, attrs: dict[str, JSON]) -> EpisodeFacts:
        model = attrs.get("model")
        return EpisodeFacts(self.pricing, model if isinstance(model, str) else None)

    def _select_when_decided(self, ep: OpenEpisode) -> None:
        """Selects the plan once no attribute is awaited, or the kept signals hit the bound."""
        kept, selection = ep.awaiting, self.selection
        assert kept is not None
        assert selection is not None
        awaited = selection.awaited(ep.episode_id, ep.attrs)
        if not awaited:
            self._select(ep, "")
        elif len(kept) >= self._buffer:
            self._select(
                ep,
                f"suite selection made after {len(kept)} signals (the selection buffer) "
                f"without {', '.join(awaited)}",
            )

    def _select(self, ep: OpenEpisode, why: str) -> None:
        """Chooses the plan on the attributes seen and evaluates the kept signals."""
        kept = ep.awaiting or []
        ep.awaiting = None
        plan = self.select_plan(ep.episode_id, ep.attrs)
        ep.evaluation = plan.start(self._facts(ep.attrs))
        self._note_unselected(ep, plan, why)
        for sig in kept:
            decided = ep.evaluation.feed(sig)
            if decided is not None:
                for top in decided:
                    self.early.append(EarlyVerdict(ep, top, sig))

    def _note_unselected(self, ep: OpenEpisode, plan: Plan, why: str) -> None:
        if why:
            ep.notes.append(why)
        if not plan.assertions and self.selection is not None:
            reason = self.selection.unselected_reason(ep.episode_id, ep.attrs)
            if reason:
                ep.notes.append(reason)

    def _evaluate(self, ep: OpenEpisode, sig: Signal, now: float) -> None:
        kept = ep.awaiting
        if kept is not None:
            kept.append(sig)
        else:
            decided = ep.evaluation.feed(sig)
            if decided is not None:
                for top in decided:
                    self.early.append(EarlyVerdict(ep, top, sig))
        if ep.end_deadline is None:
            end = self._end_cache.get(sig.name)
            if end is None:
                end = self.is_end(sig.name)
            if end:
                ep.end_deadline = now + self.rules.grace_ms
                self.ending[ep.episode_id] = ep

    def _release(self, ep: OpenEpisode, now: float, *, final: bool) -> None:
        buf = ep.reorder
        assert buf is not None
        if not buf:
            return
        newest = max(item[0] for item in buf) if not final else 0.0
        while buf and (final or buf[0][0] <= newest - self.rules.reorder_ms):
            _, _, _, sig = heapq.heappop(buf)
            self._evaluate(ep, sig, now)

    def due(self, now: float) -> list[tuple[OpenEpisode, CloseReason]]:
        """What should close by `now`, in the order the episodes opened: ended past grace,
        inactive, or over the maximum duration. Nothing is closed: a caller that must log
        its decisions first (the Kafka worker writes a control record) closes them later
        with `close`.

        Cheap enough to call often (the worker sweeps every 100 ms): before the earliest
        time an open episode can time out or be truncated, only the episodes waiting out
        their grace period are looked at, not every open one."""
        if now < self._scan_at:
            ended = [ep for ep in self.ending.values() if now >= ep.end_deadline]  # type: ignore[operator]
            ended.sort(key=_open_order)
            return [(ep, CloseReason.ENDED) for ep in ended]
        rules = self.rules
        due: list[tuple[OpenEpisode, CloseReason]] = []
        scan_at = float("inf")
        for ep in self.open.values():
            if ep.end_deadline is not None and now >= ep.end_deadline:
                due.append((ep, CloseReason.ENDED))
            elif now - ep.last_seen >= rules.inactivity_ms:
                due.append((ep, CloseReason.TIMED_OUT))
            elif rules.max_duration_ms is not None and now - ep.opened_at >= rules.max_duration_ms:
                due.append((ep, CloseReason.TRUNCATED))
            scan_at = min(scan_at, self._scan_deadline(ep))
        self._scan_at = scan_at
        return due

    def _scan_deadline(self, ep: OpenEpisode) -> float:
        """A time before which `ep` can neither time out nor be truncated: its deadlines, a
        few units in the last place early, so that the scan's own comparisons (`now - last
        >= limit`, rounded differently) can never find it due sooner."""
        deadline = ep.last_seen + self._inactivity_ms
        max_duration = self.rules.max_duration_ms
        if max_duration is not None:
            deadline = min(deadline, ep.opened_at + max_duration)
        return deadline - max(1e-3, abs(deadline) * 1e-15)

    def sweep(self, now: float) -> None:
        """Close what is due by `now`."""
        for ep, reason in self.due(now):
            self._close(ep, reason)

    def close(self, episode_id: str, reason: CloseReason) -> bool:
        """Close one open episode now (False if it is not open)."""
        ep = self.open.get(episode_id)
        if ep is None:
            return False
        self._close(ep, reason)
        return True

    def flush(self) -> None:
        """Input ran out: close everything still open."""
        for ep in list(self.open.values()):
            reason = CloseReason.ENDED if ep.end_deadline is not None else CloseReason.END_OF_INPUT
            self._close(ep, reason)

    def fail(self, episode_id: str, exc: BaseException) -> bool:
        """Feeding a signal of this episode raised: close it as `error` now (its state may be
        half updated); later signals of it are late. False if it is not open."""
        ep = self.open.get(episode_id)
        if ep is None:
            return False
        self._close(ep, CloseReason.ERROR, describe_error(exc))
        return True

    def _close(self, ep: OpenEpisode, reason: CloseReason, error: str | None = None) -> None:
        # One episode's evaluation raising must not stop a sweep closing the others: it
        # becomes this episode's `error`.
        if ep.reorder and error is None:
            try:
                self._release(ep, ep.last_seen, final=True)
            except Exception as exc:  # this episode's alone
                error = describe_error(exc)
        if ep.awaiting is not None and error is None:
            try:
                self._select(ep, "")
            except Exception as exc:  # this episode's alone
                error = describe_error(exc)
        del self.open[ep.episode_id]
        self.ending.pop(ep.episode_id, None)
        self.closed_ids[ep.episode_id] = None
        if len(self.closed_ids) > self.closed_memory:
            del self.closed_ids[next(iter(self.closed_ids))]
        pending: list[PendingJudgement] = []
        if error is None:
            try:
                pending = ep.evaluation.finish()
            except Exception as exc:  # this episode's alone
                error = describe_error(exc)
        if error is not None:
            reason = CloseReason.ERROR
        self.ready.append(ClosedEpisode(ep, reason, pending, error))

    def drain_ready(self) -> list[ClosedEpisode]:
        ready, self.ready = self.ready, []
        return ready

    def drain_early(self) -> list[EarlyVerdict]:
        early, self.early = self.early, []
        return early
