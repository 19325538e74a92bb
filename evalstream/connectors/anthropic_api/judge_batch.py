"""The judge over the Message Batches API: all of a run's questions as one batch, half price.

`BatchAnthropicJudge` is an `AnthropicJudge` with `judge_many(requests)`, which the close of a
run (`evalstream.stream.offline.resolve_judgements`) calls with every pending question at once:

1. questions answered before (response cache, memory or disk) are served from it, repeats
   are asked once;
2. the rest go out as one batch (`messages.batches.create`, each request's `custom_id` is
   the question's cache key); the batch id and the key -> custom_id map are written to a
   state file (`judge_batch_state`, default named by the hash of the questions) before
   polling, so a run killed while the batch processes resumes that batch when rerun;
3. `messages.batches.retrieve` is polled with capped exponential back-off until the batch
   has `ended`, reporting its request counts on stderr;
4. `messages.batches.results` is read and each result mapped to its question by
   `custom_id`: `succeeded` is parsed like a normal answer; `errored`, `expired` and
   `canceled` become that question's `JudgeError` (its assertion `error`, never a pass).

Batch usage is priced at `BATCH_PRICE_FACTOR` of the pricing table and counted in the judge's
usage like any answer. A single `judge(request)` (outside a run's close) is asked as usual.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from evalstream.assertions.judge.budget import (
    JudgeBudgetExhaustedError,
    Reservation,
    input_token_bound,
)
from evalstream.assertions.judge.prompt import build_prompt, parse_verdict, validate_request
from evalstream.assertions.judge.protocol import JudgeRequest, JudgeVerdict
from evalstream.connectors.anthropic_api.judge import AnthropicJudge, JudgeError, _retryable, _usage
from evalstream.connectors.anthropic_api.judge_batch_state import (
    BatchState,
    load_state,
    questions_hash,
    remove_state,
    save_state,
    state_path,
)

if TYPE_CHECKING:
    import anthropic
    from anthropic.types.messages import MessageBatch

JSON = Any
T = TypeVar("T")

BATCH_PRICE_FACTOR = 0.5
"""The Message Batches API bills half the standard price of the same tokens."""

Outcome = JudgeVerdict | BaseException


class BatchAnthropicJudge(AnthropicJudge):
    """An `AnthropicJudge` that answers a run's questions through one message batch."""

    progress: TextIO | None = None  # None: sys.stderr at the time of writing

    async def judge_many(self, requests: Sequence[JudgeRequest]) -> list[Outcome]:
        """One outcome per request, in order: a verdict or the exception that is its error."""
        outcomes: list[Outcome | None] = [None] * len(requests)
        ask: dict[str, JudgeRequest] = {}
        waiting: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            try:
                validate_request(request)
            except ValueError as exc:
                outcomes[index] = JudgeError(f"invalid judge request: {exc}")
                continue
            key = self.cache_key(request)
            cached = self._cache.get(key) or self._read_disk(key)
            if cached is not None:
                outcomes[index] = self._served_from_cache(key, cached)
            elif key in ask:
                waiting[key].append(index)
            else:
                ask[key] = request
                waiting[key] = [index]
        if ask:
            answers = await self._batch(ask)
            for key, indices in waiting.items():
                answer = answers[key]
                outcomes[indices[0]] = answer
                for index in indices[1:]:
                    outcomes[index] = (
                        self._served_from_cache(key, answer)
                        if isinstance(answer, JudgeVerdict)
                        else answer
                    )
        return [o if o is not None else JudgeError("no answer") for o in outcomes]

    # --- the batch -----------------------------------------------------------------------

    async def _batch(self, ask: dict[str, JudgeRequest]) -> dict[str, Outcome]:
        started = self._clock()
        path = state_path(ask, self.settings.batch_state)
        questions = questions_hash(ask)
        state = load_state(path, questions)
        reservation = None
        if state is None:  # a resumed batch was reserved and billed by the run that made it
            try:
                reservation = self._reserve_batch(ask)
            except JudgeBudgetExhaustedError as exc:
                for _ in ask:
                    self._count("budget_exhausted", 0.0, 0.0)
                return dict.fromkeys(ask, exc)
        spent_before = self.stats.cost_usd
        tokens_before = self._tokens_used()
        try:
            client = self._client_factory(self.settings)
            try:
                if state is None:
                    state = await self._submit(client, ask, questions)
                    save_state(path, state)
                    self._say(f"judge batch {state.batch_id}: {len(ask)} questions submitted")
                else:
                    self._say(f"judge batch {state.batch_id}: resumed from {path}")
                await self._wait_until_ended(client, state.batch_id)
                results = await self._results(client, state.batch_id)
            finally:
                await client.close()
        except JudgeError as exc:
            # Not created: nothing billed. Created but not read: it may be billed in full.
            self._settle_batch(reservation, None if state is not None else (0.0, 0))
            return self._all_failed(ask, exc, started)
        remove_state(path)
        latency = self._clock() - started
        by_custom_id = {custom_id: key for key, custom_id in state.custom_ids.items()}
        answers: dict[str, Outcome] = {}
        for custom_id, result in results.items():
            key = by_custom_id.get(custom_id)
            if key is not None and key in ask:
                answers[key] = self._answer_of(ask[key], key, result, latency)
        for key in ask:
            if key not in answers:
                answers[key] = JudgeError(
                    "the judge batch's results have no answer to this question"
                )
                self._count("error", 0.0, latency)
        spent = (self.stats.cost_usd - spent_before, self._tokens_used() - tokens_before)
        self._settle_batch(reservation, spent)
        return answers

    def _tokens_used(self) -> int:
        s = self.stats
        return s.input_tokens + s.output_tokens + s.cache_read_tokens + s.cache_write_tokens

    async def _submit(
        self, client: anthropic.AsyncAnthropic, ask: dict[str, JudgeRequest], questions: str
    ) -> BatchState:
        entries = []
        for key, request in ask.items():
            params = self._params(
                build_prompt(request), request, request.model or self.settings.model
            )
            params.update(params.pop("extra_body", {}))  # batch params are the body as sent
            entries.append({"custom_id": key, "params": params})
        batch = await self._api(lambda: client.messages.batches.create(requests=entries))  # type: ignore[arg-type]  # the params are the Messages body
        return BatchState(batch.id, questions, {key: key for key in ask})

    async def _wait_until_ended(self, client: anthropic.AsyncAnthropic, batch_id: str) -> None:
        delay = self.settings.batch_poll_initial_s
        while True:
            batch: MessageBatch = await self._api(
                lambda: client.messages.batches.retrieve(batch_id)
            )
            counts = batch.request_counts
            self._say(
                f"judge batch {batch_id}: {batch.processing_status}; {counts.succeeded} "
                f"succeeded, {counts.errored} errored, {counts.expired} expired, "
                f"{counts.canceled} canceled, {counts.processing} processing"
            )
            if batch.processing_status == "ended":
                return
            await self._sleep(delay)
            delay = min(delay * 2, self.settings.batch_poll_max_s)

    async def _results(self, client: anthropic.AsyncAnthropic, batch_id: str) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            decoder = await client.messages.batches.results(batch_id)
            return {entry.custom_id: entry.result async for entry in decoder}

        return await self._api(read)

    def _answer_of(self, request: JudgeRequest, key: str, result: Any, latency: float) -> Outcome:
        if result.type == "succeeded":
            message = result.message
            model = request.model or self.settings.model
            usage = _usage(message)
            cost = (self.pricing.cost(model, usage) or 0.0) * BATCH_PRICE_FACTOR
            self._count_usage(model, usage, price_factor=BATCH_PRICE_FACTOR)
            try:
                verdict = parse_verdict(self._answer(message), request)
            except Exception as exc:
                self._count("error", cost, latency)
                return exc
            self._count("ok", cost, latency)
            verdict = replace(verdict, cost_usd=cost, latency_ms=latency * 1000.0)
            self._cache[key] = verdict
            self._write_disk(key, verdict)
            return verdict
        self._count("error", 0.0, latency)
        if result.type == "errored":
            error = result.error.error
            return JudgeError(f"the judge's batch request errored: {error.type}: {error.message}")
        if result.type == "expired":
            return JudgeError(
                "the judge's batch request expired before it was processed (a batch has 24 "
                "hours); run again to ask it again"
            )
        return JudgeError(f"the judge's batch request was {result.type}; run again to ask it")

    def _all_failed(
        self, ask: dict[str, JudgeRequest], exc: JudgeError, started: float
    ) -> dict[str, Outcome]:
        for _ in ask:
            self._count("error", 0.0, self._clock() - started)
        return dict.fromkeys(ask, exc)

    def _reserve_batch(self, ask: dict[str, JudgeRequest]) -> Reservation | None:
        """Holds the batch's worst case (at the batch price) against the budget; settled to
        the batch's usage once its results are read."""
        if self.budget is None:
            return None
        usd = 0.0
        tokens = 0
        for request in ask.values():
            prompt = build_prompt(request)
            bound = input_token_bound(prompt.system, prompt.user, json.dumps(prompt.schema))
            model = request.model or self.settings.model
            worst = self.pricing.worst_case_cost(model, bound, self.settings.max_tokens)
            usd += (worst or 0.0) * BATCH_PRICE_FACTOR
            tokens += bound + self.settings.max_tokens
        try:
            return self.budget.reserve(usd, tokens, self._wall_clock())
        finally:
            self._report_budget()

    def _settle_batch(
        self, reservation: Reservation | None, spent: tuple[float, int] | None
    ) -> None:
        """`spent` None: the batch may have been billed, its worst case stays counted."""
        if self.budget is None or reservation is None:
            return
        usd, tokens = spent if spent is not None else (reservation.usd, reservation.tokens)
        self.budget.settle(reservation, usd, tokens, self._wall_clock())
        self._report_budget()

    async def _api(self, call: Callable[[], Awaitable[T]]) -> T:
        """One Batches API call, retried like a question (429, 529, 5xx, connection)."""
        import anthropic  # noqa: PLC0415 - loaded with the client

        attempt = 0
        while True:
            try:
                return await call()
            except anthropic.APIStatusError as exc:
                if not _retryable(exc) or not self._retries.may_retry(attempt + 1):
                    raise JudgeError(f"judge batch: HTTP {exc.status_code}: {exc.message}") from exc
                delay = self._backoff(attempt, exc.response.headers)
            except anthropic.APIConnectionError as exc:
                if not self._retries.may_retry(attempt + 1):
                    raise JudgeError(f"judge batch: {type(exc).__name__}: {exc}") from exc
                delay = self._backoff(attempt, None)
            attempt += 1
            self.stats.retries += 1
            await self._sleep(delay)

    def _say(self, line: str) -> None:
        stream = self.progress or sys.stderr
        print(f"[{time.strftime('%H:%M:%S')}] {line}", file=stream, flush=True)


__all__ = ["BATCH_PRICE_FACTOR", "BatchAnthropicJudge"]
