"""runCase / runDataset: run a target on a dataset's cases and evaluate every sample.

- Timeouts: the case's `timeout`, else the run's default, else the dataset's `defaultTimeout`,
  else 60 s (all in ms). A timed-out sample is cancelled (async targets) or stopped
  (subprocess group killed; sync callables told to stop at their next recorder call) and
  counted as an error.
- Concurrency: at most `concurrency` samples run at once; results are kept in case order.
- Retries: a sample that *errored* in the target (raised, exited non-zero, timed out, wrote
  bad signals) is retried up to `retries` times with exponential back-off; a sample that
  *failed* its assertions is never retried.
- fail-fast stops at the first sample that does not pass; `interrupt()` (Ctrl-C) stops at
  once. Either way the finished samples are kept and the rest are marked skipped with the
  reason.
- Each sample's signals are evaluated by the engine (`CaseEvaluator`), with the judge for
  `llm.judge` assertions (none: those are `error`, never `pass`). A batch judge
  (`judge_many`) is asked all the run's questions at once (`DeferredJudgements`).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from evalstream.assertions.errors import TargetError
from evalstream.assertions.evalruns.build import case_result, dataset_result
from evalstream.assertions.evalruns.evaluate import (
    CaseEvaluator,
    errored_sample,
    sample_from_closed,
)
from evalstream.assertions.evalruns.models import (
    CaseResult,
    DatasetResult,
    ErrorKind,
    RunOptionsRecord,
    SampleResult,
)
from evalstream.assertions.evalruns.selection import PlannedCase, for_dataset_run, select_cases
from evalstream.assertions.evaluation.results import iso_ms
from evalstream.assertions.judge.protocol import Judge
from evalstream.assertions.suite_format.suites import Case, Suite
from evalstream.assertions.wire.pricing import PricingTable
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.targets.anthropic_hook import instrument_anthropic
from evalstream.connectors.targets.base import Target, TargetCall, decode_signals, normalize
from evalstream.connectors.targets.recorder import Recorder
from evalstream.stream.evalruns.deferred_judgements import DeferredJudgements
from evalstream.stream.offline import resolve_judgements

JSON = Any
DEFAULT_TIMEOUT_MS = 60_000.0
RETRYABLE: frozenset[ErrorKind] = frozenset({"target", "timeout", "signals"})


def wall_clock_ms() -> float:
    return time.time() * 1000.0


def new_run_id(now_ms: float) -> str:
    stamp = datetime.fromtimestamp(now_ms / 1000.0, tz=UTC).strftime("%Y%m%dT%H%M%S")
    return f"run-{stamp}-{secrets.token_hex(4)}"


@dataclass(frozen=True)
class RunSettings:
    repeat: int = 1
    k: int = 3
    concurrency: int = 4
    default_timeout_ms: float | None = None
    retries: int = 0
    retry_backoff_s: float = 0.5
    fail_fast: bool = False
    tags: tuple[str, ...] = ()
    case_ids: tuple[str, ...] = ()
    keep_signals: bool = True
    instrument_anthropic: bool = True

    def __post_init__(self) -> None:
        for name, low in (("repeat", 1), ("k", 1), ("concurrency", 1), ("retries", 0)):
            if getattr(self, name) < low:
                raise ValueError(f"{name} must be >= {low}, got {getattr(self, name)}")
        if self.default_timeout_ms is not None and self.default_timeout_ms <= 0:
            raise ValueError(f"the timeout must be > 0 ms, got {self.default_timeout_ms:g}")

    def record(self, suite: Suite) -> RunOptionsRecord:
        return RunOptionsRecord(
            repeat=self.repeat,
            k=self.k,
            concurrency=self.concurrency,
            default_timeout_ms=self.default_timeout_ms or suite.default_timeout,
            retries=self.retries,
            fail_fast=self.fail_fast,
            tags=list(self.tags),
            case_ids=list(self.case_ids),
        )


class Progress(Protocol):
    """What a runner reports while it works (the CLI draws a progress bar from it)."""

    def begin(self, label: str, samples: int) -> None: ...

    def sample_done(self, case_id: str, sample: SampleResult) -> None: ...

    def end(self) -> None: ...


class NoProgress:
    def begin(self, label: str, samples: int) -> None:
        return None

    def sample_done(self, case_id: str, sample: SampleResult) -> None:
        return None

    def end(self) -> None:
        return None


@dataclass
class _Stop:
    reason: str | None = None
    interrupted: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class DatasetRunner:
    def __init__(
        self,
        suite: Suite,
        target: Target,
        settings: RunSettings | None = None,
        *,
        judge: Judge | None = None,
        pricing: PricingTable | None = None,
        clock: Callable[[], float] = wall_clock_ms,
        progress: Progress | None = None,
        run_id: str | None = None,
        variant_id: str | None = None,
        variant_name: str | None = None,
        config: dict[str, JSON] | None = None,
    ) -> None:
        self.suite = for_dataset_run(suite)
        self.target = target
        self.settings = settings or RunSettings()
        self.judge = judge
        self.evaluator = CaseEvaluator(self.suite, pricing)
        self.clock = clock
        self.progress = progress or NoProgress()
        self.run_id = run_id or new_run_id(clock())
        self.variant_id = variant_id
        self.variant_name = variant_name
        self.config = config or {}
        self._stop = _Stop()
        self._deferred: DeferredJudgements | None = None

    # --- control ---------------------------------------------------------------------------

    def interrupt(self) -> None:
        """Stop now (Ctrl-C): running samples are cancelled, finished ones are kept."""
        self._halt("interrupted", interrupted=True)

    def _halt(self, reason: str, *, interrupted: bool = False) -> None:
        if self._stop.reason is None:
            self._stop.reason = reason
        self._stop.interrupted = self._stop.interrupted or interrupted
        current = asyncio.current_task()
        for task in self._stop.tasks:
            if task is not current and not task.done():
                task.cancel()

    # --- one case --------------------------------------------------------------------------

    def timeout_ms(self, case: Case) -> float:
        return (
            case.timeout
            or self.settings.default_timeout_ms
            or self.suite.default_timeout
            or DEFAULT_TIMEOUT_MS
        )

    async def run_case(self, case: Case, sample_index: int = 0) -> SampleResult:
        """One sample of one case, with retries for errors."""
        attempt = 0
        while True:
            attempt += 1
            sample = await self._attempt(case, sample_index, attempt)
            done = (
                sample.status != "error"
                or sample.error_kind not in RETRYABLE
                or attempt > self.settings.retries
            )
            if done:
                return sample
            await asyncio.sleep(self.settings.retry_backoff_s * 2 ** (attempt - 1))

    async def _attempt(self, case: Case, index: int, attempt: int) -> SampleResult:
        episode_id = f"{self.run_id}-{case.id}-{index}" + (f"-a{attempt}" if attempt > 1 else "")
        attrs: dict[str, JSON] = {"case_id": case.id, "run_id": self.run_id, "sample": index}
        if self.variant_id is not None:
            attrs["variant"] = self.variant_id
        recorder = Recorder(
            episode_id=episode_id,
            case_id=case.id,
            input=case.input,
            attrs=attrs,
            config=self.config,
            clock=self.clock,
        )
        call = TargetCall(case.id, case.input, episode_id, attrs, recorder, dict(self.config))
        timeout_ms = self.timeout_ms(case)
        started_ms = self.clock()
        t0 = time.monotonic()

        def failed(kind: ErrorKind, message: str, notes: Sequence[str] = ()) -> SampleResult:
            return errored_sample(
                index=index,
                episode_id=episode_id,
                attempts=attempt,
                kind=kind,
                message=message,
                duration_ms=(time.monotonic() - t0) * 1000.0,
                signals=self._partial(call) if self.settings.keep_signals else (),
                notes=notes,
            )

        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                out = await self.target.run(call)
        except TimeoutError:
            notes = []
            if recorder.abandoned:
                notes.append(
                    "the synchronous target did not stop after cancellation and keeps running "
                    "in its thread; call the recorder often (it raises CaseCancelled), make the "
                    "target async, or run it as `cmd:`"
                )
            return failed("timeout", f"timed out after {timeout_ms:g} ms; cancelled", notes)
        except TargetError as exc:
            kind: ErrorKind = "signals" if exc.kind == "signals" else "target"
            return failed(kind, str(exc))
        except asyncio.CancelledError:
            recorder.cancel()
            raise
        except Exception as exc:  # the agent's own failure: data, not a crash of the run
            return failed("target", f"{type(exc).__name__}: {exc}")
        ended_ms = self.clock()
        duration_ms = (time.monotonic() - t0) * 1000.0
        try:
            decoded = decode_signals(out.signals, episode_id, ended_ms)
        except TargetError as exc:
            return failed("signals", str(exc))
        signals = normalize(
            decoded,
            episode_id=episode_id,
            attrs=attrs,
            input=case.input,
            started_ms=started_ms,
            ended_ms=ended_ms,
            output=out.output,
        )
        closed = self.evaluator.assemble(signals)
        if self._deferred is not None:  # a batch judge: asked with the run's other samples
            await self._deferred.resolve(closed)
        else:
            await resolve_judgements([closed], self.judge)
        return sample_from_closed(
            closed,
            index=index,
            attempts=attempt,
            duration_ms=duration_ms,
            signals=signals if self.settings.keep_signals else (),
        )

    def _partial(self, call: TargetCall) -> list[Signal]:
        """What a failed run emitted before it stopped (best effort, for the report)."""
        items: list[Signal | JSON] = [*call.recorder.signals, *call.received]
        with contextlib.suppress(TargetError):
            return decode_signals(items, call.episode_id, self.clock())
        return list(call.recorder.signals)

    # --- the dataset -----------------------------------------------------------------------

    async def run(self) -> DatasetResult:
        settings = self.settings
        planned = select_cases(self.suite, tags=settings.tags, case_ids=settings.case_ids)
        runnable = [p for p in planned if p.runs]
        samples: dict[int, list[SampleResult]] = {p.index: [] for p in planned}
        gate = asyncio.Semaphore(settings.concurrency)
        started_ms = self.clock()
        t0 = time.monotonic()
        label = self.variant_id or self.suite.name
        self.progress.begin(label, len(runnable) * settings.repeat)

        jobs = len(runnable) * settings.repeat
        if self.judge is not None and callable(getattr(self.judge, "judge_many", None)):
            self._deferred = DeferredJudgements(self.judge, jobs, gate)

        async def job(p: PlannedCase, index: int) -> None:
            try:
                async with gate:
                    if self._stop.reason is not None:
                        return
                    sample = await self.run_case(p.case, index)
            finally:
                if self._deferred is not None:
                    self._deferred.job_done()
            samples[p.index].append(sample)
            self.progress.sample_done(p.case.id, sample)
            if settings.fail_fast and not sample.passed:
                self._halt(f"fail-fast: case {p.case.id!r} sample {index} {sample.status}")

        self._stop.tasks = [
            asyncio.create_task(job(p, i)) for p in runnable for i in range(settings.repeat)
        ]
        context = instrument_anthropic() if settings.instrument_anthropic else nullcontext()
        try:
            with context:
                await asyncio.gather(*self._stop.tasks, return_exceptions=True)
        finally:
            self.progress.end()
        cases: list[CaseResult] = [
            case_result(
                p,
                samples[p.index],
                skip_reason=self._stop.reason,
                duration_ms=sum(s.duration_ms for s in samples[p.index]),
            )
            for p in planned
        ]
        return dataset_result(
            self.suite,
            cases,
            run_id=self.run_id,
            options=settings.record(self.suite),
            target=self.target.describe(),
            variant_id=self.variant_id,
            variant_name=self.variant_name,
            started_at=iso_ms(started_ms),
            completed_at=iso_ms(self.clock()),
            duration_ms=(time.monotonic() - t0) * 1000.0,
            interrupted=self._stop.interrupted,
            stopped_early=None if self._stop.interrupted else self._stop.reason,
        )


async def run_dataset(
    suite: Suite,
    target: Target,
    settings: RunSettings | None = None,
    **kwargs: Any,
) -> DatasetResult:
    """Run `target` over `suite` and close the target afterwards (see DatasetRunner)."""
    runner = DatasetRunner(suite, target, settings, **kwargs)
    try:
        return await runner.run()
    finally:
        await target.aclose()
