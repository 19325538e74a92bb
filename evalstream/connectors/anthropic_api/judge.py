"""The LLM judge over the Anthropic Messages API (the `anthropic` SDK's async client).

`AnthropicJudge(settings)` implements `evalstream.assertions.judge.protocol.Judge`: it builds the
prompt with `evalstream.assertions.judge.prompt`, asks for structured JSON (the API's
`output_config` JSON Schema format, or a forced `record_verdict` tool call), parses and normalises
the verdict, and adds:

- bounded concurrency (`max_concurrency` requests in flight per event loop);
- retries on rate limits (429), overload (529), server errors (5xx) and connection errors,
  paced by the shared `evalstream.connectors.retry_policy.BackoffPolicy` (exponential back-off with
  equal jitter; a `retry-after` / `retry-after-ms` header wins over the computed delay, capped at
  `backoff_max_s`). A question waiting to retry gives its
  concurrency slot back, so other questions keep going. The SDK's own retries are off, so
  every attempt and every wait is ours to count and to test (the sleep function is injected);
- a spend budget (`evalstream.assertions.judge.budget`): each question reserves its worst case
  before it is sent and settles to the reported usage, so concurrent questions cannot overrun a
  ceiling; a refused question raises `JudgeBudgetExhaustedError` (the assertion is `error`);
- prompt caching: the system prompt (criteria, rubric, calibration examples) is one block
  marked `cache_control: ephemeral`; only the user message (the output under judgement)
  varies. Cache reads and writes are counted and priced, and the saving reported;
- a response cache keyed by the content hash of the question (`JudgeRequest.cache_key`, the
  prompt version, the effective model and answer format), in memory and optionally on disk;
  identical questions in flight at once are asked once;
- cost (from the response's usage and the pricing table) and latency per call, totalled in
  `stats` and reported to an optional `JudgeObserver` (the stream layer maps it onto its
  Prometheus metrics, so this module does not depend on `evalstream/stream/`).

Errors are exceptions (`JudgeError`, `JudgeResponseError`): the caller
(`evalstream.stream.offline.resolve_judgements`) turns them into `error` verdicts, never into
passes.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import random
import ssl
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from evalstream.assertions.errors import EvaluationError
from evalstream.assertions.judge.budget import (
    WINDOWS,
    BudgetLimits,
    JudgeBudgetExhaustedError,
    Reservation,
    SpendBudget,
    input_token_bound,
)
from evalstream.assertions.judge.prompt import (
    PROMPT_VERSION,
    VERDICT_TOOL,
    JudgePrompt,
    JudgeResponseError,
    build_prompt,
    parse_verdict,
    validate_request,
)
from evalstream.assertions.judge.protocol import JudgeRequest, JudgeVerdict
from evalstream.assertions.judge.usage import JudgeUsage
from evalstream.assertions.kinds.judge import DEFAULT_JUDGE_MODEL
from evalstream.assertions.wire.pricing import PricingTable, Usage, default_pricing
from evalstream.connectors.retry_policy import BackoffPolicy, api_should_retry, retry_after_s

# Importing the SDK takes longer than the rest of an `evalstream check`: it is imported by the
# first call to the API, so that a run whose suites never ask the judge does not pay for it.
if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message

__all__ = [
    "AnthropicJudge",
    "JudgeBudgetExhaustedError",
    "JudgeError",
    "JudgeObserver",
    "JudgeResponseError",
    "JudgeSettings",
    "JudgeStats",
]

JSON = Any


class JudgeError(EvaluationError):
    """The judge could not be asked (a non-retryable API error, or retries exhausted)."""


class JudgeSettings(BaseModel):
    """How the judge talks to the API. `from_env` reads them from the environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(
        DEFAULT_JUDGE_MODEL, description="Model for requests that name none (llm.judge `model`)."
    )
    api_key: SecretStr | None = Field(None, description="Falls back to ANTHROPIC_API_KEY.")
    base_url: str | None = Field(None, description="API base URL (tests: a local server).")
    max_tokens: int = Field(1024, ge=64, description="Upper bound of the judge's answer.")
    answer_format: Literal["json_schema", "tool"] = Field(
        "json_schema",
        description="`json_schema`: structured output (output_config.format); "
        "`tool`: a forced `record_verdict` tool call, for models without structured output.",
    )
    send_temperature: bool = Field(
        True,
        description="Send the request's temperature (default 0); off for models that "
        "reject the parameter.",
    )
    max_concurrency: int = Field(4, ge=1, description="Questions in flight at once.")
    max_retries: int = Field(4, ge=0, description="Retries after the first attempt.")
    backoff_initial_s: float = Field(0.5, gt=0, allow_inf_nan=False)
    backoff_max_s: float = Field(30.0, gt=0, allow_inf_nan=False)
    timeout_s: float = Field(60.0, gt=0, description="Per attempt.")
    cache_dir: str | None = Field(None, description="Persist verdicts here (one JSON per key).")
    prompt_cache: bool = Field(
        True,
        description="Mark the system prompt (criteria, rubric, examples) for the API's prompt "
        "cache (`cache_control: ephemeral`).",
    )
    batch: bool = Field(
        False,
        description="Ask a run's questions as one Message Batch (half price, answers within "
        "hours) instead of one request each.",
    )
    batch_state: str | None = Field(
        None,
        description="The batch's state file (batch id, question -> custom_id), so an "
        "interrupted run resumes its batch; default: named by the questions' hash under "
        "~/.cache/evalstream/judge-batches/.",
    )
    batch_poll_initial_s: float = Field(
        5.0, gt=0, allow_inf_nan=False, description="First pause between batch polls."
    )
    batch_poll_max_s: float = Field(
        60.0, gt=0, allow_inf_nan=False, description="Longest pause between batch polls."
    )
    budget_usd_per_hour: float | None = Field(
        None, gt=0, description="Most USD the judge spends in any rolling hour (none: no cap)."
    )
    budget_usd_per_day: float | None = Field(
        None, gt=0, description="Most USD the judge spends in any rolling 24 hours."
    )
    budget_tokens_per_hour: int | None = Field(
        None, gt=0, description="Most tokens (input, cache and output) in any rolling hour."
    )
    budget_tokens_per_day: int | None = Field(
        None, gt=0, description="Most tokens (input, cache and output) in any rolling 24 hours."
    )

    def budget_limits(self) -> BudgetLimits:
        return BudgetLimits(
            usd_per_hour=self.budget_usd_per_hour,
            usd_per_day=self.budget_usd_per_day,
            tokens_per_hour=self.budget_tokens_per_hour,
            tokens_per_day=self.budget_tokens_per_day,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> JudgeSettings:
        """ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and EVALSTREAM_JUDGE_<FIELD> (upper case)."""
        env = os.environ if env is None else env
        data: dict[str, Any] = {}
        if env.get("ANTHROPIC_API_KEY"):
            data["api_key"] = env["ANTHROPIC_API_KEY"]
        if env.get("ANTHROPIC_BASE_URL"):
            data["base_url"] = env["ANTHROPIC_BASE_URL"]
        for name in cls.model_fields:
            raw = env.get(f"EVALSTREAM_JUDGE_{name.upper()}")
            if raw is not None:
                data[name] = raw
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)


class JudgeObserver(Protocol):
    """Told about every question (`outcome`: `ok`, `error`, `cached` or `budget_exhausted`),
    every answer's prompt-cache tokens, and the budget left after each change."""

    def judge_call(self, outcome: str, cost_usd: float, latency_s: float) -> None: ...

    def judge_cache(self, read_tokens: int, write_tokens: int, saving_usd: float) -> None: ...

    def judge_budget(self, remaining_usd: Mapping[str, float]) -> None: ...


JudgeStats = JudgeUsage

ClientFactory = Callable[[JudgeSettings], "anthropic.AsyncAnthropic"]
Sleep = Callable[[float], Awaitable[None]]


def default_client(settings: JudgeSettings) -> anthropic.AsyncAnthropic:
    key = settings.api_key.get_secret_value() if settings.api_key else None
    if key is None:
        raise JudgeError(
            "the LLM judge needs an API key: set ANTHROPIC_API_KEY (or JudgeSettings.api_key)"
        )
    import anthropic  # noqa: PLC0415 - see the imports above

    return anthropic.AsyncAnthropic(
        api_key=key,
        base_url=settings.base_url,
        max_retries=0,
        timeout=settings.timeout_s,
        http_client=_http_client(settings),
    )


def _http_client(settings: JudgeSettings) -> anthropic.DefaultAsyncHttpxClient | None:
    """On Linux, an HTTP client sharing one TLS context per process. The judge opens a new
    client for each batch of questions (it closes it when idle, see `_ask`), and building
    the SDK's default TLS context reads the CA store: ~60 ms of CPU per batch, on the worker's
    event loop. Elsewhere the SDK's default (the platform's trust store)."""
    if sys.platform != "linux":
        return None
    import anthropic  # noqa: PLC0415 - see the imports above

    return anthropic.DefaultAsyncHttpxClient(verify=_tls_context(), timeout=settings.timeout_s)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The system CA store (SSL_CERT_FILE / SSL_CERT_DIR honoured), loaded once."""
    return ssl.create_default_context()


class AnthropicJudge:
    """A `Judge` asking a Claude model. Use one instance per process; close with `aclose`."""

    def __init__(
        self,
        settings: JudgeSettings | None = None,
        *,
        pricing: PricingTable | None = None,
        observer: JudgeObserver | None = None,
        client_factory: ClientFactory = default_client,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.perf_counter,
        wall_clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings or JudgeSettings.from_env()
        self.pricing = pricing or default_pricing()
        self.observer = observer
        self.stats = JudgeStats()
        self._client_factory = client_factory
        self._sleep = sleep
        self._clock = clock
        self._wall_clock = wall_clock
        limits = self.settings.budget_limits()
        self.budget = SpendBudget(limits) if limits.any else None
        self._rng = rng or random.Random()
        self._retries = BackoffPolicy(
            initial_s=self.settings.backoff_initial_s,
            max_s=self.settings.backoff_max_s,
            max_attempts=self.settings.max_retries + 1,
        )
        self._cache: dict[str, JudgeVerdict] = {}
        self._inflight: dict[str, asyncio.Future[JudgeVerdict]] = {}
        # The SDK client and the semaphore belong to one event loop; `evalstream check`
        # runs one loop per call, so they are made again when the loop changes.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: anthropic.AsyncAnthropic | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._active = 0
        self._report_budget()

    async def __aenter__(self) -> AnthropicJudge:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.close()
        self._client = None
        self._loop = None

    # --- the Judge protocol ----------------------------------------------------------------

    async def judge(self, request: JudgeRequest) -> JudgeVerdict:
        try:
            validate_request(request)
        except ValueError as exc:
            raise JudgeError(f"invalid judge request: {exc}") from exc
        key = self.cache_key(request)
        cached = self._cache.get(key) or self._read_disk(key)
        if cached is not None:
            return self._served_from_cache(key, cached)
        inflight = self._inflight.get(key)
        if inflight is not None:
            return self._served_from_cache(key, await asyncio.shield(inflight))
        future: asyncio.Future[JudgeVerdict] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            verdict = await self._ask(request)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # marked as retrieved: waiters re-raise it, nobody else must
            raise
        finally:
            del self._inflight[key]
        future.set_result(verdict)
        self._cache[key] = verdict
        self._write_disk(key, verdict)
        return verdict

    def cache_key(self, request: JudgeRequest) -> str:
        """The request's content hash, the prompt version, the effective model and format."""
        model = request.model or self.settings.model
        blob = f"{PROMPT_VERSION}\0{model}\0{self.settings.answer_format}\0{request.cache_key()}"
        return hashlib.sha256(blob.encode()).hexdigest()

    # --- one question ------------------------------------------------------------------------

    async def _ask(self, request: JudgeRequest) -> JudgeVerdict:
        model = request.model or self.settings.model
        prompt = build_prompt(request)
        params = self._params(prompt, request, model)
        call = _Call(model)
        if self.budget is not None:
            # the text the API tokenises; the JSON framing is in the bound's overhead
            call.input_bound = input_token_bound(
                prompt.system, prompt.user, json.dumps(prompt.schema)
            )
        client, semaphore = self._loop_state()
        self._active += 1
        try:
            return await self._ask_once(client, semaphore, params, request, call)
        finally:
            self._active -= 1
            if self._active == 0 and self._client is client:
                # Idle: close the connection pool now. A later question (perhaps on another
                # event loop) opens a new one; nothing is left for the garbage collector.
                self._client = None
                await client.close()

    async def _ask_once(
        self,
        client: anthropic.AsyncAnthropic,
        semaphore: asyncio.Semaphore,
        params: dict[str, JSON],
        request: JudgeRequest,
        call: _Call,
    ) -> JudgeVerdict:
        started = self._clock()
        model = call.model
        try:
            message = await self._create(client, semaphore, params, call)
            usage = _usage(message)
            call.cost = self.pricing.cost(model, usage) or 0.0
            call.tokens = (
                usage.input_tokens
                + usage.output_tokens
                + usage.cache_read_tokens
                + usage.cache_write_tokens
            )
            self._count_usage(model, usage)
            verdict = parse_verdict(self._answer(message), request)
        except JudgeBudgetExhaustedError:
            self._count("budget_exhausted", 0.0, 0.0)
            raise
        except BaseException:
            self._count("error", call.cost, self._clock() - started)
            raise
        finally:
            self._settle(call)
        latency = self._clock() - started
        self._count("ok", call.cost, latency)
        return replace(verdict, cost_usd=call.cost, latency_ms=latency * 1000.0)

    def _params(self, prompt: JudgePrompt, request: JudgeRequest, model: str) -> dict[str, JSON]:
        params: dict[str, JSON] = {
            "model": model,
            "max_tokens": self.settings.max_tokens,
            "system": self._system(prompt.system),
            "messages": [{"role": "user", "content": prompt.user}],
        }
        if self.settings.answer_format == "json_schema":
            params["output_config"] = {"format": {"type": "json_schema", "schema": prompt.schema}}
        else:
            params["tools"] = [
                {
                    "name": VERDICT_TOOL,
                    "description": "Record the grading verdict.",
                    "input_schema": prompt.schema,
                }
            ]
            params["tool_choice"] = {"type": "tool", "name": VERDICT_TOOL}
        if self.settings.send_temperature and request.temperature is not None:
            # This SDK version has no `temperature` argument; the API still takes it.
            params["extra_body"] = {"temperature": request.temperature}
        return params

    def _system(self, text: str) -> str | list[dict[str, JSON]]:
        """The system prompt; with prompt caching one text block that ends the cached prefix
        (it depends only on the assertion, never on the output under judgement)."""
        if not self.settings.prompt_cache:
            return text
        return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]

    async def _create(
        self,
        client: anthropic.AsyncAnthropic,
        semaphore: asyncio.Semaphore,
        params: dict[str, JSON],
        call: _Call,
    ) -> Message:
        """Sends, retrying; holds a concurrency slot only while a request is on the wire, so
        a question waiting out a `retry-after` does not hold back the others. The budget is
        reserved once, when the first slot is granted, so questions queued for a slot hold
        no reservation. The slot and budget work between attempts is why this loop is ours,
        not tenacity's; its pauses and attempt bound come from the same `BackoffPolicy`."""
        import anthropic  # noqa: PLC0415 - loaded with the client, see the imports above

        attempt = 0  # retries so far
        while True:
            try:
                async with semaphore:
                    if call.reservation is None and self.budget is not None:
                        call.reservation = self._reserve(call)
                    call.on_wire = True
                    message = await client.messages.create(**params)
                    call.on_wire = False
                    return message
            except anthropic.APIStatusError as exc:
                call.on_wire = False  # the API answered with an error: nothing billed
                if not _retryable(exc) or not self._retries.may_retry(attempt + 1):
                    raise JudgeError(_describe(exc, attempt)) from exc
                delay = self._backoff(attempt, exc.response.headers)
            except anthropic.APITimeoutError as exc:
                # The request may have reached the API and be billed: the budget counts it at
                # its worst case, and a retry must fit the budget again.
                self._settle(call)
                call.reservation, call.on_wire = None, False
                if not self._retries.may_retry(attempt + 1):
                    raise JudgeError(_describe(exc, attempt)) from exc
                delay = self._backoff(attempt, None)
            except anthropic.APIConnectionError as exc:
                call.on_wire = False  # refused or reset before an answer: not billed
                if not self._retries.may_retry(attempt + 1):
                    raise JudgeError(_describe(exc, attempt)) from exc
                delay = self._backoff(attempt, None)
            attempt += 1
            self.stats.retries += 1
            await self._sleep(delay)

    def _backoff(self, attempt: int, headers: Mapping[str, str] | None) -> float:
        """The pause after failed attempt `attempt` (0-based): the server's hint, else the
        policy's back-off."""
        hint = retry_after_s(headers, self._wall_clock()) if headers is not None else None
        return self._retries.delay(attempt + 1, self._rng, hint)

    def _answer(self, message: Message) -> str | dict[str, JSON]:
        if message.stop_reason == "max_tokens":
            raise JudgeResponseError(
                f"the judge's answer was cut at max_tokens={self.settings.max_tokens}; "
                "raise EVALSTREAM_JUDGE_MAX_TOKENS"
            )
        for block in message.content:
            if block.type == "tool_use" and block.name == VERDICT_TOOL:
                return dict(block.input) if isinstance(block.input, dict) else {}
        text = "".join(block.text for block in message.content if block.type == "text")
        if not text:
            raise JudgeResponseError("the judge's answer has neither text nor a verdict tool call")
        return text

    # --- budget ------------------------------------------------------------------------------

    def _reserve(self, call: _Call) -> Reservation:
        assert self.budget is not None
        model, input_bound, output_bound = call.model, call.input_bound, self.settings.max_tokens
        usd = self.pricing.worst_case_cost(model, input_bound, output_bound)
        if usd is None:
            if self.budget.limits.usd_per_hour or self.budget.limits.usd_per_day:
                raise JudgeError(
                    f"the judge model {model!r} has no price, so its USD budget cannot be "
                    "kept; add it to a pricing table (--pricing FILE) or name a priced model"
                )
            usd = 0.0
        try:
            return self.budget.reserve(usd, input_bound + output_bound, self._wall_clock())
        finally:
            self._report_budget()

    def _settle(self, call: _Call) -> None:
        """Settles to the reported usage; a request whose answer never came (a timeout, or
        the question cancelled while it was on the wire) at its reserved worst case."""
        if self.budget is None or call.reservation is None:
            return
        held = call.reservation
        usd, tokens = (held.usd, held.tokens) if call.on_wire else (call.cost, call.tokens)
        self.budget.settle(held, usd, tokens, self._wall_clock())
        self._report_budget()

    def budget_remaining(self) -> dict[str, float]:
        """USD left per window that has a USD ceiling (reservations count as spent)."""
        if self.budget is None:
            return {}
        now = self._wall_clock()
        left = {w: self.budget.remaining_usd(w, now) for w in WINDOWS}
        return {w: v for w, v in left.items() if v is not None}

    def _report_budget(self) -> None:
        if self.observer is not None and self.budget is not None:
            self.observer.judge_budget(self.budget_remaining())

    # --- bookkeeping -------------------------------------------------------------------------

    def _count_usage(self, model: str, usage: Usage, *, price_factor: float = 1.0) -> None:
        stats = self.stats
        stats.input_tokens += usage.input_tokens
        stats.output_tokens += usage.output_tokens
        stats.cache_read_tokens += usage.cache_read_tokens
        stats.cache_write_tokens += usage.cache_write_tokens
        saving = self.pricing.cache_saving(model, usage) * price_factor
        stats.cache_saving_usd += saving
        if self.observer is not None and (usage.cache_read_tokens or usage.cache_write_tokens):
            self.observer.judge_cache(usage.cache_read_tokens, usage.cache_write_tokens, saving)

    def _loop_state(self) -> tuple[anthropic.AsyncAnthropic, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.settings.max_concurrency)
            self._client = None
            self._loop = loop
        if self._client is None:
            self._client = self._client_factory(self.settings)
        return self._client, self._semaphore

    def _served_from_cache(self, key: str, verdict: JudgeVerdict) -> JudgeVerdict:
        self._cache[key] = verdict
        self._count("cached", 0.0, 0.0)
        return replace(verdict, cost_usd=0.0, latency_ms=0.0)

    def _count(self, outcome: str, cost: float, latency_s: float) -> None:
        stats = self.stats
        stats.calls += 1
        if outcome == "ok":
            stats.ok += 1
        elif outcome == "error":
            stats.errors += 1
        elif outcome == "budget_exhausted":
            stats.budget_exhausted += 1
        else:
            stats.cached += 1
        stats.cost_usd += cost
        stats.latency_s += latency_s
        if self.observer is not None:
            self.observer.judge_call(outcome, cost, latency_s)

    def _disk_path(self, key: str) -> Path | None:
        return Path(self.settings.cache_dir) / f"{key}.json" if self.settings.cache_dir else None

    def _read_disk(self, key: str) -> JudgeVerdict | None:
        path = self._disk_path(key)
        if path is None or not path.is_file():
            return None
        try:
            data = json.loads(path.read_text("utf-8"))
            return JudgeVerdict(
                score=float(data["score"]),
                reasoning=str(data.get("reasoning", "")),
                criteria_scores={str(k): float(v) for k, v in data["criteria_scores"].items()},
                cost_usd=float(data.get("cost_usd", 0.0)),
                latency_ms=float(data.get("latency_ms", 0.0)),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # a damaged cache entry is asked again, not trusted

    def _write_disk(self, key: str, verdict: JudgeVerdict) -> None:
        path = self._disk_path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(asdict(verdict), sort_keys=True), "utf-8")
        os.replace(temporary, path)


@dataclass
class _Call:
    """One question's bookkeeping across its attempts."""

    model: str
    input_bound: int = 0
    reservation: Reservation | None = None
    on_wire: bool = False
    cost: float = 0.0
    tokens: int = 0


def _usage(message: Message) -> Usage:
    u = message.usage
    cache_read = u.cache_read_input_tokens or 0
    cache_write = u.cache_creation_input_tokens or 0
    return Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        total_tokens=u.input_tokens + u.output_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def _retryable(exc: anthropic.APIStatusError) -> bool:
    return api_should_retry(exc.status_code, exc.response.headers)


def _describe(exc: anthropic.APIError, retries: int) -> str:
    import anthropic  # noqa: PLC0415 - loaded with the client, see the imports above

    after = f" after {retries} retries" if retries else ""
    if isinstance(exc, anthropic.APIStatusError):
        return f"judge call failed{after}: HTTP {exc.status_code}: {exc.message}"
    return f"judge call failed{after}: {type(exc).__name__}: {exc}"
