"""Live replay: each recorded episode becomes a new run of a candidate model, scored against
the recorded episode as its baseline.

For every recorded episode (grouped by episode id, dispatched when its end signal arrives,
so memory holds only the episodes still open in the recording):

1. Every `provider:start` that recorded its request is re-issued to the candidate (one call
   after another, in the episode's order); the candidate's answer replaces the recorded
   `provider:end` / `provider:error`. Calls without a recorded request keep their recorded
   signals. The candidate's answer also replaces the recorded answer text (`text:*` signals
   and `harness:end.payload.output` are dropped, so the episode output is the candidate's).
2. Every later signal moves by the difference between the candidate's and the recorded call
   durations, so the candidate episode's latency is the candidate's.
3. Both episodes are evaluated with the current suites; the candidate is scored on the five
   dimensions against an explicit baseline made of the recorded episode, and the
   per-episode alert rules run on its scores.

The replay is open-loop: the agent is not re-run, so signals that followed from the
recorded answers (tool calls, state changes) stay as recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from evalstream.assertions.alerting.alert_rules import AlertRules, EpisodeAlert, episode_passes
from evalstream.assertions.errors import SignalDecodeError
from evalstream.assertions.evaluation.assembly import CloseRules, EpisodeAssembler
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.kinds.base import CompileContext
from evalstream.assertions.scores.baselines import BaselineEntry, BaselineKey, summarise
from evalstream.assertions.scores.dimensions import EpisodeScores, ScoringInput, score_episode
from evalstream.assertions.suite_format.suites import Suite, SuiteSet
from evalstream.assertions.wire.patterns import compile_pattern
from evalstream.assertions.wire.pricing import PricingTable, default_pricing
from evalstream.assertions.wire.signals import Signal, signal_from_obj
from evalstream.connectors.anthropic_api.messages_replay import (
    CandidateReply,
    MessagesClient,
    request_of,
)
from evalstream.connectors.codecs.llm_calls import llm_call_signals
from evalstream.connectors.files.recording import EpisodeRename, RecordedMessage
from evalstream.stream.offline import resolve_judgements
from evalstream.stream.recordings.replay import LLM_TOPIC_SUFFIX, Source, is_control

JSON = Any
DEFAULT_SUFFIX = "@candidate"
ANSWER_SIGNALS = ("text:",)  # the recorded answer's text; the candidate's replaces it


@dataclass
class LivePair:
    """One recorded episode and its candidate run, scored against it."""

    original: EpisodeResult
    candidate: EpisodeResult
    scores: EpisodeScores
    alerts: list[EpisodeAlert]
    reissued: int
    failed_calls: int
    kept_calls: int

    @property
    def passed(self) -> bool:
        return episode_passes(self.candidate.passed, self.alerts)

    def to_json(self) -> dict[str, JSON]:
        return {
            "original": self.original.episode_id,
            "candidate": self.candidate.episode_id,
            "passed": self.passed,
            "original_status": self.original.status,
            "candidate_status": self.candidate.status,
            "calls": {
                "reissued": self.reissued,
                "failed": self.failed_calls,
                "kept_as_recorded": self.kept_calls,
            },
            "scores": self.scores.to_json(),
            "alerts": [a.to_json() for a in self.alerts],
            "original_result": self.original.to_json(),
            "candidate_result": self.candidate.to_json(),
        }


@dataclass
class LiveReport:
    pairs: list[LivePair] = field(default_factory=list)
    undecodable: int = 0
    interrupted: bool = False

    def exit_code(self) -> int:
        return 0 if all(p.passed for p in self.pairs) else 1

    def to_json(self) -> dict[str, JSON]:
        return {
            "episodes": [p.to_json() for p in self.pairs],
            "summary": {
                "episodes": len(self.pairs),
                "passed": sum(p.passed for p in self.pairs),
                "failed": sum(not p.passed for p in self.pairs),
                "reissued_calls": sum(p.reissued for p in self.pairs),
                "failed_calls": sum(p.failed_calls for p in self.pairs),
                "undecodable_messages": self.undecodable,
            },
        }


def decode(msg: RecordedMessage) -> list[Signal]:
    """The signals of one recorded message (control records and tombstones have none)."""
    if msg.value is None or is_control(msg):
        return []
    key = msg.key.decode("utf-8") if msg.key is not None else None
    obj = orjson.loads(msg.value)
    if msg.topic.endswith(LLM_TOPIC_SUFFIX):
        return llm_call_signals(obj, episode_id=key)
    return [signal_from_obj(obj, episode_id=key)]


def _renamed(sig: Signal, episode_id: str, shift_ms: float, extra: dict[str, JSON]) -> Signal:
    attrs = {**sig.attrs, **extra} if sig.attrs else None
    ts = sig.ts + shift_ms
    return Signal(
        sig.id,
        episode_id,
        sig.name,
        ts,
        ts,
        sig.seq,
        sig.agent,
        sig.parent,
        sig.provider,
        sig.payload,
        attrs,
    )


def _matches_call(start: Signal, end: Signal) -> bool:
    """Whether a recorded `provider:end`/`:error` answers this `provider:start`: by its
    parent link, by the codec's `<call>:start`/`<call>:end` ids, else by the agent."""
    if end.parent is not None:
        return end.parent == start.id
    if start.id.endswith(":start") and end.id.endswith((":end", ":error")):
        return end.id.rsplit(":", 1)[0] == start.id.rsplit(":", 1)[0]
    return end.agent == start.agent


class LiveReplayer:
    def __init__(
        self,
        client: MessagesClient,
        suites: Sequence[Suite],
        *,
        rename: EpisodeRename | None = None,
        rules: CloseRules | None = None,
        pricing: PricingTable | None = None,
        alert_rules: AlertRules | None = None,
        variant: str = "candidate",
        concurrency: int = 4,
        on_pair: Callable[[LivePair], None] | None = None,
    ) -> None:
        self.client = client
        self.rename = rename or EpisodeRename(suffix=DEFAULT_SUFFIX)
        self.rules = rules or CloseRules()
        self.pricing = pricing or default_pricing()
        self.suite_set = SuiteSet(suites, CompileContext(self.pricing))
        self.alert_rules = alert_rules or AlertRules()
        self.variant = variant
        self.slots = asyncio.Semaphore(max(1, concurrency))
        self.on_pair = on_pair
        self.end_patterns = [compile_pattern(p) for p in self.rules.end_patterns]

    def _is_end(self, sig: Signal) -> bool:
        return any(p.matches(sig.name) for p in self.end_patterns)

    async def run(self, source: Source, halt: asyncio.Event | None = None) -> LiveReport:
        halt = halt or asyncio.Event()
        report = LiveReport()
        open_episodes: dict[str, list[Signal]] = {}
        tasks: set[asyncio.Task[None]] = set()

        async def dispatch(signals: list[Signal]) -> None:
            await self.slots.acquire()  # back-pressure: at most `concurrency` in flight

            async def one() -> None:
                try:
                    pair = await self.replay_episode(signals)
                    report.pairs.append(pair)
                    if self.on_pair is not None:
                        self.on_pair(pair)
                finally:
                    self.slots.release()

            task = asyncio.create_task(one())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        try:
            async for msg in source.messages():
                try:
                    signals = decode(msg)
                except (orjson.JSONDecodeError, UnicodeDecodeError, SignalDecodeError):
                    report.undecodable += 1
                    continue
                for sig in signals:
                    open_episodes.setdefault(sig.episode_id, []).append(sig)
                    if self._is_end(sig):
                        await dispatch(open_episodes.pop(sig.episode_id))
                if halt.is_set():
                    report.interrupted = True
                    break
            if not report.interrupted:
                for signals in open_episodes.values():
                    await dispatch(signals)
            while tasks:
                await asyncio.gather(*list(tasks))
        finally:
            for task in list(tasks):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*list(tasks), return_exceptions=True)
            await source.close()
        report.pairs.sort(key=lambda p: p.original.episode_id)
        return report

    async def candidate_signals(self, recorded: list[Signal]) -> tuple[list[Signal], int, int, int]:
        """The candidate run of one recorded episode: (signals, reissued, failed, kept)."""
        original_id = recorded[0].episode_id
        new_id = self.rename.episode(original_id)
        extra = {"replay_of": original_id, "variant": self.variant}
        out: list[Signal] = []
        shift = 0.0
        pending: tuple[Signal, float, CandidateReply] | None = None  # recorded start, ts, reply
        reissued = failed = kept = 0
        for index, sig in enumerate(recorded):
            if sig.name.startswith(ANSWER_SIGNALS):
                continue
            if pending is not None and sig.name in ("provider:end", "provider:error"):
                start, start_ts, reply = pending
                if _matches_call(start, sig):
                    pending = None
                    end_ts = start_ts + reply.duration_ms
                    name = "provider:error" if reply.error is not None else "provider:end"
                    out.append(
                        Signal(
                            f"{start.id}:candidate-end",
                            new_id,
                            name,
                            end_ts,
                            end_ts,
                            None,
                            sig.agent,
                            start.id,
                            sig.provider,
                            reply.end_payload(),
                            None,
                        )
                    )
                    shift += reply.duration_ms - (sig.ts - start.ts)
                    continue
            if sig.name == "provider:start":
                request = request_of(sig.payload)
                if request is not None:
                    reply = await self.client.create(request)
                    reissued += 1
                    failed += reply.error is not None
                    payload = dict(sig.payload)
                    payload["model"] = reply.model or payload.get("model")
                    start = _renamed(sig, new_id, shift, extra)
                    start.payload = payload
                    out.append(start)
                    pending = (sig, start.ts, reply)
                    continue
                kept += 1
            moved = _renamed(sig, new_id, shift, extra if index == 0 else {})
            if self._is_end(sig) and isinstance(sig.payload, dict):
                payload = {k: v for k, v in sig.payload.items() if k != "output"}
                if isinstance(payload.get("durationMs"), int | float):
                    payload["durationMs"] = payload["durationMs"] + shift
                moved.payload = payload
            out.append(moved)
        if out and not out[0].attrs:
            out[0].attrs = dict(extra)
        return out, reissued, failed, kept

    async def evaluate(self, signals: Iterable[Signal]) -> tuple[EpisodeResult, list[str]]:
        """One episode through assembly and evaluation, in event time (as `check` does)."""
        assembler = EpisodeAssembler(
            self.suite_set.plan_for, self.rules, self.pricing, selection=self.suite_set
        )
        watermark = float("-inf")
        for sig in signals:
            watermark = max(watermark, sig.ts)
            assembler.feed(sig, watermark)
        assembler.flush()
        closed = assembler.drain_ready()
        assert len(closed) == 1, "one episode's signals close one episode"
        await resolve_judgements(closed, None)  # no judge here: llm.judge is `error`
        return closed[0].report(), closed[0].evaluation.facts.tool_names()

    async def replay_episode(self, recorded: list[Signal]) -> LivePair:
        candidate, reissued, failed, kept = await self.candidate_signals(recorded)
        original, original_tools = await self.evaluate(recorded)
        result, tools = await self.evaluate(candidate)
        base_input = ScoringInput.from_result(original, original_tools)
        key = BaselineKey.of(result.attrs)
        baseline = summarise(
            key, f"recording:{original.episode_id}", [BaselineEntry.of(base_input)]
        )
        scores = score_episode(ScoringInput.from_result(result, tools), baseline)
        return LivePair(
            original,
            result,
            scores,
            self.alert_rules.evaluate(scores),
            reissued,
            failed,
            kept,
        )
