"""Alert sinks: deliver alerts to a generic webhook or a Slack incoming webhook.

A sink never blocks the stream. `offer(alert)` is synchronous and O(1): it puts the alert on
a bounded queue and returns at once; when the queue is full the alert is dropped and
counted. One background task per sink delivers the queue in order over HTTP (httpx), with
retries:

- a network error, a timeout, HTTP 408, 429 or 5xx is retried, up to `max_attempts` in all,
  paced by the shared `evalstream.connectors.retry_policy.BackoffPolicy`: an exponential back-off
  with equal jitter, a delay drawn uniformly from [step / 2, step] where
  step = min(backoff_max_s, backoff_base_s * 2 ** (attempt - 1)); a `Retry-After` header
  (seconds or an HTTP date; `retry-after-ms` too) replaces that delay, capped by
  `backoff_max_s`;
- any other HTTP status (a 4xx: a bad URL, a revoked token) is permanent: not retried.

Failures are data, not exceptions: each alert that is not delivered — retries exhausted
(`exhausted`), refused for good (`rejected`) or dropped from a full queue (`dropped`) — calls
`on_failure(sink_name, reason)` once (wire it to `evalstream_alert_sink_failures_total{sink}`)
and is counted in `stats`.

Bodies:
- `WebhookSink`: `{"version": 1, "source": "evalstream", "alert": <the alert's JSON>}`,
  optionally signed: with a `secret`, the header `X-Evalstream-Signature:
  sha256=<hex HMAC-SHA256 of the body>`.
- `SlackSink`: Slack's incoming-webhook JSON, `{"text": <one-line fallback>, "blocks":
  [<section with the headline and message>, <context with the dedupe key>]}`.

An alert is a JSON object: `EpisodeAlert.to_json()` or `AlertEvent.to_json()` (fields
`severity`, `message`, `dedupe_key`, `dimension` or `metric`, `state` for windowed alerts).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from evalstream.assertions.errors import InputError
from evalstream.connectors.retry_policy import Attempt, BackoffPolicy, retry_after_s

JSON = Any
FailureCallback = Callable[[str, str], None]
Sleep = Callable[[float], Awaitable[None]]
RETRY_STATUSES = frozenset({408, 429})
BODY_VERSION = 1
SIGNATURE_HEADER = "X-Evalstream-Signature"
_STOP = object()  # queue sentinel: deliver what came before it, then end


class AlertSinkError(InputError):
    """A sink setting is invalid (a URL, a queue size, a retry setting)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a delivery is tried (see the module docstring)."""

    max_attempts: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or self.max_attempts < 1:
            raise AlertSinkError(f"max_attempts must be an integer >= 1, got {self.max_attempts}")
        for name in ("backoff_base_s", "backoff_max_s", "timeout_s"):
            value = getattr(self, name)
            if not value >= 0:  # also rejects NaN
                raise AlertSinkError(f"{name} must be a number >= 0, got {value!r}")
        for name in ("backoff_base_s", "backoff_max_s"):
            if not math.isfinite(getattr(self, name)):
                raise AlertSinkError(f"{name} must be finite (seconds)")
        if self.timeout_s == 0:
            raise AlertSinkError("timeout_s must be > 0")

    def backoff(self) -> BackoffPolicy:
        """These settings as the shared retry policy."""
        return BackoffPolicy(
            initial_s=self.backoff_base_s,
            max_s=self.backoff_max_s,
            max_attempts=self.max_attempts,
        )

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        """The pause after failed attempt number `attempt` (1-based)."""
        return self.backoff().delay(attempt, rng, retry_after)


@dataclass(slots=True)
class SinkStats:
    """Counters of one sink since it was made."""

    offered: int = 0
    delivered: int = 0
    retries: int = 0
    failed: int = 0
    dropped: int = 0
    last_error: str | None = None
    by_reason: dict[str, int] = field(default_factory=dict)


class WebhookSink:
    """POSTs each alert as JSON to `url`; see the module docstring for retries and bodies."""

    kind = "webhook"

    def __init__(
        self,
        name: str,
        url: str,
        *,
        retry: RetryPolicy | None = None,
        queue_size: int = 1000,
        headers: Mapping[str, str] | None = None,
        secret: str | None = None,
        on_failure: FailureCallback | None = None,
        client: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not name:
            raise AlertSinkError("an alert sink needs a non-empty name")
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise AlertSinkError(f"sink {name}: invalid URL {url!r}: {exc}") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise AlertSinkError(
                f"sink {name}: URL {url!r} must be absolute http(s), e.g. https://hooks.example/x"
            )
        if isinstance(queue_size, bool) or queue_size < 1:
            raise AlertSinkError(f"sink {name}: queue_size must be >= 1, got {queue_size!r}")
        self.name = name
        self.url = url
        self.retry = retry or RetryPolicy()
        self.headers = dict(headers or {})
        self.secret = secret.encode() if secret else None
        self.on_failure = on_failure
        self.stats = SinkStats()
        self._queue: asyncio.Queue[object] = asyncio.Queue(maxsize=queue_size)
        self._client = client
        self._own_client = client is None
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None
        self._in_flight = False
        self._closing = False

    # --- rendering ------------------------------------------------------------------------

    def render(self, alert: Mapping[str, JSON]) -> dict[str, JSON]:
        return {"version": BODY_VERSION, "source": "evalstream", "alert": dict(alert)}

    # --- the stream side ------------------------------------------------------------------

    def offer(self, alert: Mapping[str, JSON]) -> bool:
        """Queue an alert for delivery; False (and counted as `dropped`) when the queue is full."""
        self.stats.offered += 1
        try:
            self._queue.put_nowait(alert)
        except asyncio.QueueFull:
            self._failed("dropped", f"queue full ({self._queue.maxsize} alerts waiting)")
            return False
        return True

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is not None:
            return
        if self._client is None:
            self._client = httpx.AsyncClient()
        self._task = asyncio.create_task(self._run(), name=f"alert-sink:{self.name}")

    async def close(self, drain_timeout_s: float = 5.0) -> None:
        """Deliver what is queued (for at most `drain_timeout_s`), then stop; alerts left
        undelivered then count as failed (`exhausted`)."""
        task = self._task
        if task is not None:
            self._closing = True  # the task ends once the queue is empty
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(_STOP)
            done, _ = await asyncio.wait({task}, timeout=drain_timeout_s)
            if not done:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                if self._in_flight:
                    self._failed("exhausted", "sink closed during delivery")
            self._task = None
            self._closing = False
        while not self._queue.empty():
            if self._queue.get_nowait() is not _STOP:
                self._failed("exhausted", "sink closed before delivery")
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> WebhookSink:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- delivery -------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            alert = await self._queue.get()
            if alert is _STOP:
                return
            assert isinstance(alert, Mapping)
            self._in_flight = True
            await self.deliver(alert)
            self._in_flight = False
            if self._closing and self._queue.empty():
                return

    async def deliver(self, alert: Mapping[str, JSON]) -> bool:
        """Send one alert now, with retries; True when the sink accepted it."""
        body = orjson.dumps(self.render(alert))
        headers = {"content-type": "application/json", **self.headers}
        if self.secret is not None:
            digest = hmac.new(self.secret, body, hashlib.sha256).hexdigest()
            headers[SIGNATURE_HEADER] = f"sha256={digest}"
        client = self._client
        if client is None:
            raise RuntimeError(f"sink {self.name} is not started")
        policy = self.retry

        async def attempt() -> Attempt[str | None]:
            """One POST; its result is the error, None when the sink accepted the alert."""
            try:
                response = await client.post(
                    self.url, content=body, headers=headers, timeout=policy.timeout_s
                )
            except httpx.HTTPError as exc:
                return Attempt(f"{type(exc).__name__}: {exc}", retryable=True)
            status = response.status_code
            if 200 <= status < 300:
                return Attempt(None)
            return Attempt(
                f"HTTP {status}: {response.text[:200]}",
                retryable=status >= 500 or status in RETRY_STATUSES,
                retry_after_s=retry_after_s(response.headers, time.time()),
            )

        def count_retry(failed: Attempt[str | None], pause: float) -> None:
            self.stats.retries += 1
            self.stats.last_error = failed.result

        last = await policy.backoff().run(
            attempt, rng=self._rng, sleep=self._sleep, on_retry=count_retry
        )
        if last.result is None:
            self.stats.delivered += 1
            return True
        if not last.retryable:
            self._failed("rejected", last.result)
        else:
            self._failed("exhausted", f"{policy.max_attempts} attempts failed; last: {last.result}")
        return False

    def _failed(self, reason: str, error: str) -> None:
        stats = self.stats
        if reason == "dropped":
            stats.dropped += 1
        else:
            stats.failed += 1
        stats.by_reason[reason] = stats.by_reason.get(reason, 0) + 1
        stats.last_error = error
        if self.on_failure is not None:
            self.on_failure(self.name, reason)


_SEVERITY_MARK = {"critical": ":rotating_light:", "warning": ":warning:"}


def alert_headline(alert: Mapping[str, JSON]) -> str:
    """`CRITICAL cost (firing)`: severity, what regressed, and the lifecycle state if any."""
    severity = str(alert.get("severity", "unknown")).upper()
    what = alert.get("dimension") or alert.get("metric") or "alert"
    state = alert.get("state")
    return f"{severity} {what}" + (f" ({state})" if state else "")


class SlackSink(WebhookSink):
    """A Slack incoming webhook (also Mattermost and other Slack-compatible receivers)."""

    kind = "slack"

    def render(self, alert: Mapping[str, JSON]) -> dict[str, JSON]:
        headline = alert_headline(alert)
        message = str(alert.get("message", ""))
        mark = _SEVERITY_MARK.get(str(alert.get("severity", "")).lower(), ":bell:")
        if alert.get("state") == "resolved":
            mark = ":white_check_mark:"
        context = f"evalstream · {alert.get('dedupe_key', '')}"
        return {
            "text": f"{headline}: {message}",
            "blocks": [
                {
                    "type": "section",
                    "text": {"type": "mrkdwn", "text": f"{mark} *{headline}*\n{message}"},
                },
                {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
            ],
        }


SINK_KINDS: dict[str, type[WebhookSink]] = {"webhook": WebhookSink, "slack": SlackSink}


def make_sink(kind: str, name: str, url: str, **options: Any) -> WebhookSink:
    """A sink by kind (`webhook`, `slack`); options as the sink's constructor takes them."""
    cls = SINK_KINDS.get(kind)
    if cls is None:
        raise AlertSinkError(
            f"unknown alert sink kind {kind!r}; valid: {', '.join(sorted(SINK_KINDS))}"
        )
    return cls(name, url, **options)


class AlertSinks:
    """Several sinks as one: `offer` fans an alert out; start and close them together."""

    def __init__(self, sinks: Iterable[WebhookSink]) -> None:
        self.sinks = list(sinks)
        names = [s.name for s in self.sinks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise AlertSinkError(f"alert sink names must be unique: {', '.join(dupes)}")

    def offer(self, alert: Mapping[str, JSON]) -> int:
        """Queue on every sink; returns how many accepted it."""
        return sum(1 for sink in self.sinks if sink.offer(alert))

    async def start(self) -> None:
        for sink in self.sinks:
            await sink.start()

    async def close(self, drain_timeout_s: float = 5.0) -> None:
        await asyncio.gather(*(s.close(drain_timeout_s) for s in self.sinks))

    async def __aenter__(self) -> AlertSinks:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
