"""The offline job behind `evalstream check`: recorded signals through the same stages.

Time is event time: the watermark (largest timestamp read so far) drives grace periods and
inactivity, so a recording closes its episodes exactly as live traffic would have.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from evalstream.assertions.evaluation.assembly import (
    Accept,
    ClosedEpisode,
    CloseRules,
    EpisodeAssembler,
)
from evalstream.assertions.evaluation.records import episode_record
from evalstream.assertions.evaluation.results import describe_error
from evalstream.assertions.evaluation.verdicts import error_from_exception
from evalstream.assertions.judge.protocol import NO_JUDGE, Judge, JudgeVerdict
from evalstream.assertions.judge.usage import JudgeUsage
from evalstream.assertions.kinds.base import CompileContext
from evalstream.assertions.reports.check_report import CheckReport, RejectedInput
from evalstream.assertions.suite_format.suites import Suite, SuiteSet
from evalstream.assertions.wire.pricing import PricingTable, default_pricing
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.codecs.jsonl import Rejected, read_signals
from evalstream.connectors.files.file_kinds import refuse_other_kind_of_signals

JSON = Any
SWEEP_EVERY_MS = 1_000.0
log = logging.getLogger(__name__)


async def resolve_judgements(closed: Sequence[ClosedEpisode], judge: Judge | None) -> None:
    """Ask the judge every pending question (concurrently, or as one batch when the judge
    has `judge_many`); no judge means `error`."""
    jobs = [(c, p) for c in closed for p in c.pending]
    if not jobs:
        return
    if judge is None:
        for c, p in jobs:
            c.evaluation.resolve(p.leaf, NO_JUDGE)
        return
    judge_many = getattr(judge, "judge_many", None)
    verdicts: Sequence[JudgeVerdict | BaseException]
    if callable(judge_many):  # a batch judge: every question of the close in one batch
        verdicts = await judge_many([p.request for _, p in jobs])
    else:
        verdicts = await asyncio.gather(
            *(judge.judge(p.request) for _, p in jobs), return_exceptions=True
        )
    for (c, p), verdict in zip(jobs, verdicts, strict=True):
        if isinstance(verdict, BaseException):
            c.evaluation.resolve(p.leaf, error_from_exception(verdict))
        else:
            c.evaluation.resolve(p.leaf, verdict.outcome(p.request.min_score))


def evaluate_signals(
    items: Iterable[Signal | Rejected],
    suites: Sequence[Suite],
    *,
    rules: CloseRules | None = None,
    pricing: PricingTable | None = None,
    judge: Judge | None = None,
    on_record: Callable[[dict[str, JSON]], None] | None = None,
) -> CheckReport:
    """Run signals (in arrival order) through assembly and evaluation; results by start time.
    `on_record`: every closed episode's record (as the worker publishes it), in close order."""
    pricing = pricing or default_pricing()
    suite_set = SuiteSet(suites, CompileContext(pricing))
    assembler = EpisodeAssembler(suite_set.plan_for, rules, pricing, selection=suite_set)
    closed: list[ClosedEpisode] = []
    rejected: list[RejectedInput] = []
    watermark = float("-inf")
    last_sweep = float("-inf")
    for item in items:
        if isinstance(item, Rejected):
            rejected.append(RejectedInput(item.source, item.line, item.reason, item.message))
            continue
        watermark = max(watermark, item.ts)
        try:
            accepted = assembler.feed(item, watermark)
        except Exception as exc:  # the assembler isolates evaluation; this is the rest
            if not assembler.fail(item.episode_id, exc):
                log.error("signal %s could not be fed", item.id, exc_info=exc)
                rejected.append(
                    RejectedInput(item.episode_id, None, "episode_error", describe_error(exc))
                )
            accepted = Accept.ACCEPTED
        if accepted is Accept.LATE:
            rejected.append(
                RejectedInput(
                    item.episode_id,
                    None,
                    "late",
                    f"signal {item.id} ({item.name}) arrived after "
                    f"episode {item.episode_id} closed",
                )
            )
        if watermark - last_sweep >= SWEEP_EVERY_MS:
            assembler.sweep(watermark)
            last_sweep = watermark
        if assembler.ready:
            closed.extend(assembler.drain_ready())
    assembler.flush()
    closed.extend(assembler.drain_ready())
    asyncio.run(resolve_judgements(closed, judge))
    results = [c.report() for c in closed]  # one episode failing is that episode's `error`
    if on_record is not None:
        for c, r in zip(closed, results, strict=True):
            on_record(episode_record(r, c.episode.first_signal_id))
    for r in results:
        if r.error is not None:
            log.error("episode %r reported as error: %s", r.episode_id, r.error)
    results.sort(key=lambda r: (r.started_ts if r.started_ts is not None else 0.0, r.episode_id))
    unknown = sorted(
        {
            r.case_id
            for r in results
            if r.case_id is not None and not suite_set.knows_case(r.case_id)
        }
    )
    for r in results:
        if r.case_id in unknown:
            r.notes.append(f"case_id {r.case_id!r} is not a case of any suite")
    return CheckReport(results, rejected, unknown, judge=judge_usage(judge))


def judge_usage(judge: Judge | None) -> JudgeUsage | None:
    """A copy of the judge's usage totals when it keeps them and was asked."""
    usage = getattr(judge, "stats", None)
    return replace(usage) if isinstance(usage, JudgeUsage) and usage.calls else None


def check_files(
    paths: Sequence[str],
    suites: Sequence[Suite],
    *,
    rules: CloseRules | None = None,
    pricing: PricingTable | None = None,
    judge: Judge | None = None,
    episode_id: str | None = None,
    on_record: Callable[[dict[str, JSON]], None] | None = None,
) -> CheckReport:
    """Signals from files through `evaluate_signals`. A file whose first line is rejected
    and that looks like another kind of file (a store export, a suite...) is a
    WrongFileKindError naming the command that reads it, not one rejection per line."""

    def items() -> Iterable[Signal | Rejected]:
        for path in paths:
            signals = read_signals(path, episode_id=episode_id)
            first = next(signals, None)
            if first is None:
                continue
            refuse_other_kind_of_signals(path, first)
            yield first
            yield from signals

    return evaluate_signals(
        items(), suites, rules=rules, pricing=pricing, judge=judge, on_record=on_record
    )
