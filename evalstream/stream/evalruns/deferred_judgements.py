"""A dataset run's judge questions held back and asked together, for a batch judge.

With a judge that answers many questions at once (`judge_many`, the Message Batches judge),
each sample's closed episode waits here instead of asking its own questions. When every
sample of the run is either finished or waiting, all the waiting episodes' questions are
asked in one `resolve_judgements` call (one batch) and the samples go on. A waiting sample
gives back its concurrency slot, so the samples not yet started can run their targets.
"""

from __future__ import annotations

import asyncio

from evalstream.assertions.evaluation.assembly import ClosedEpisode
from evalstream.assertions.judge.protocol import Judge
from evalstream.stream.offline import resolve_judgements


class DeferredJudgements:
    """Collects closed episodes until all `jobs` samples are done or waiting, then asks."""

    def __init__(self, judge: Judge, jobs: int, slots: asyncio.Semaphore) -> None:
        self.judge = judge
        self._open = jobs
        self._slots = slots
        self._waiting: list[ClosedEpisode] = []
        self._released = asyncio.Event()
        self._flushing: asyncio.Task[None] | None = None

    async def resolve(self, closed: ClosedEpisode) -> None:
        """Waits until `closed`'s questions are answered, with the others of the run."""
        if not closed.pending:
            return
        self._waiting.append(closed)
        released = self._released
        self._slots.release()  # a waiting sample holds no concurrency slot
        try:
            self._flush_when_all_wait()
            await released.wait()
        finally:
            await self._slots.acquire()

    def job_done(self) -> None:
        """A sample finished (or was skipped): one fewer to wait for."""
        self._open -= 1
        self._flush_when_all_wait()

    def _flush_when_all_wait(self) -> None:
        if not self._waiting or len(self._waiting) < self._open:
            return
        waiting, self._waiting = self._waiting, []
        released, self._released = self._released, asyncio.Event()

        async def flush() -> None:
            try:
                await resolve_judgements(waiting, self.judge)
            finally:
                released.set()

        self._flushing = asyncio.create_task(flush())
