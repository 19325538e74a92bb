"""Evaluation events out over OTLP/HTTP (protobuf,
evalstream/connectors/otel_export/otlp_encode.py), in the exporter's own thread.

Two modes:

- `logs`: the conventions' carrier. Each event is an OTLP log record with event name
  `gen_ai.evaluation.result`, the evaluated span's `trace_id` / `span_id`, and the event's
  attributes (POST `…/v1/logs`).
- `spans`: for backends that only take traces (Phoenix, Langfuse). Each event is a
  zero-duration span named `evaluation <gen_ai.evaluation.name>`, a child of the evaluated
  span, with the same attributes plus `openinference.span.kind: EVALUATOR` (POST
  `…/v1/traces`). An errored evaluation has status ERROR.

`offer(event)` never blocks: a bounded queue, and an event offered to a full queue is dropped
and counted. The thread sends batches (`batch_size`, or whatever came within
`flush_interval_s`); a connection error, a timeout, HTTP 429 or 5xx is retried after an
exponential back-off with full jitter (a `Retry-After` in seconds raises the delay), up to
`max_attempts` in all; then the batch's events count as `failed`, as do those of any other
refusal (4xx). `close()` sends what is queued and stops, within its timeout.

Settings follow the OpenTelemetry SDK's environment (`resolve_settings`): an explicit
endpoint wins; else `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` / `…_TRACES_ENDPOINT` (used as is),
else `OTEL_EXPORTER_OTLP_ENDPOINT` plus `/v1/logs` / `/v1/traces`, else localhost:4318.
Headers from `OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS` or `OTEL_EXPORTER_OTLP_HEADERS`
(`key=value,…`, values URL-encoded), the timeout in seconds from
`OTEL_EXPORTER_OTLP_<SIGNAL>_TIMEOUT` or `OTEL_EXPORTER_OTLP_TIMEOUT` (as the Python SDK reads
it), the resource from `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx

from evalstream.assertions.errors import InputError
from evalstream.connectors.otel_export.evaluation_events import EvaluationEvent
from evalstream.connectors.otel_export.otlp_encode import encode_logs, encode_spans

MODES = ("logs", "spans")
SIGNALS = {"logs": "logs", "spans": "traces"}  # mode -> OTLP signal (path and metric label)
DEFAULT_ENDPOINT = "http://localhost:4318"
DEFAULT_TIMEOUT_S = 10.0
RETRYABLE_STATUS = frozenset({408, 429})
log = logging.getLogger(__name__)


class OtlpExportError(InputError):
    """OTLP export settings that cannot work (a bad endpoint, header or timeout)."""


@dataclass(frozen=True)
class OtlpExportSettings:
    endpoint: str  # the full URL, `/v1/logs` or `/v1/traces` included
    mode: str = "logs"
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S
    resource: Mapping[str, str] = field(default_factory=lambda: {"service.name": "evalstream"})
    queue_size: int = 10_000
    batch_size: int = 512
    flush_interval_s: float = 1.0
    max_attempts: int = 6
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0

    @property
    def signal(self) -> str:
        return SIGNALS[self.mode]


def resolve_settings(endpoint: str | None, mode: str, env: Mapping[str, str]) -> OtlpExportSettings:
    """The settings of `--otlp-endpoint` / `--otlp-mode` and the SDK's environment."""
    if mode not in MODES:
        raise OtlpExportError(f"OTLP export mode {mode!r} is not one of: {', '.join(MODES)}")
    signal = SIGNALS[mode]
    upper = signal.upper()
    if endpoint:
        url = signal_url(endpoint, signal)
    elif env.get(f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT"):
        url = _checked_url(env[f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT"], signal)
    else:
        base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
        url = _checked_url(f"{base.rstrip('/')}/v1/{signal}", signal)
    header_var = f"OTEL_EXPORTER_OTLP_{upper}_HEADERS"
    raw_headers = env.get(header_var) or env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    timeout_var = f"OTEL_EXPORTER_OTLP_{upper}_TIMEOUT"
    raw_timeout = env.get(timeout_var) or env.get("OTEL_EXPORTER_OTLP_TIMEOUT")
    resource = dict(parse_pairs(env.get("OTEL_RESOURCE_ATTRIBUTES") or "", "resource attribute"))
    resource["service.name"] = (
        env.get("OTEL_SERVICE_NAME") or resource.get("service.name") or "evalstream"
    )
    return OtlpExportSettings(
        endpoint=url,
        mode=mode,
        headers=parse_pairs(raw_headers, "header"),
        timeout_s=_timeout(raw_timeout),
        resource=resource,
    )


def signal_url(endpoint: str, signal: str) -> str:
    """`endpoint` as a base URL (`/v1/<signal>` appended), or as is when it already ends in
    an OTLP signal path."""
    _checked_url(endpoint, signal)
    path = urllib.parse.urlsplit(endpoint).path.rstrip("/")
    for other in SIGNALS.values():
        if path.endswith(f"/v1/{other}"):
            if other != signal:
                raise OtlpExportError(
                    f"OTLP endpoint {endpoint!r} is the {other} path, but this mode exports "
                    f"{signal}: use …/v1/{signal}, the base URL, or the other --otlp-mode"
                )
            return endpoint
    return f"{endpoint.rstrip('/')}/v1/{signal}"


def _checked_url(url: str, signal: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OtlpExportError(
            f"OTLP endpoint {url!r} is not an http(s) URL with a host: pass e.g. "
            f"http://localhost:4318 (…/v1/{signal} is appended) or the full …/v1/{signal} URL"
        )
    return url


def parse_pairs(raw: str, what: str) -> dict[str, str]:
    """`key=value,key2=value2` with URL-encoded values (the W3C Baggage-like format of
    `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_RESOURCE_ATTRIBUTES`)."""
    out: dict[str, str] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = urllib.parse.unquote(key).strip()
        if not sep or not key:
            raise OtlpExportError(
                f"OTLP {what} {item.strip()!r} is not key=value: write e.g. "
                "authorization=Basic%20<base64>, several separated by commas"
            )
        out[key.lower() if what == "header" else key] = urllib.parse.unquote(value).strip()
    return out


def _timeout(raw: str | None) -> float:
    if raw is None or not raw.strip():
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise OtlpExportError(
            f"OTEL_EXPORTER_OTLP_TIMEOUT {raw!r} is not a positive number of seconds"
        )
    return value


# --- the exporter -------------------------------------------------------------------------


@dataclass
class ExportStats:
    sent: int = 0
    dropped: int = 0
    failed: int = 0
    retries: int = 0


# (signal, outcome, count) for every outcome; () for every retry.
OnEvents = Callable[[str, str, int], None]
OnRetry = Callable[[], None]


class OtlpExporter:
    """Batches evaluation events to one OTLP/HTTP endpoint from a thread of its own."""

    def __init__(
        self,
        settings: OtlpExportSettings,
        *,
        on_events: OnEvents | None = None,
        on_retry: OnRetry | None = None,
    ) -> None:
        self.settings = settings
        self.stats = ExportStats()
        self._on_events = on_events
        self._on_retry = on_retry
        self._queue: queue.Queue[EvaluationEvent] = queue.Queue(maxsize=settings.queue_size)
        self._closing = threading.Event()
        self._abort = threading.Event()  # close() ran out of time: no more retries
        self._lock = threading.Lock()
        self._encode = encode_logs if settings.mode == "logs" else encode_spans
        self._thread = threading.Thread(target=self._run, name="evalstream-otlp", daemon=True)
        self._thread.start()

    def offer(self, event: EvaluationEvent) -> bool:
        """Queue `event` for export; False (and counted as dropped) when the queue is full
        or the exporter is closed."""
        if self._closing.is_set():
            self._count("dropped", 1)
            return False
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._count("dropped", 1)
            return False
        return True

    def close(self, timeout_s: float = 10.0) -> ExportStats:
        """Send what is queued, then stop; after `timeout_s` retries stop and what is left
        counts as dropped."""
        self._closing.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._abort.set()
            self._thread.join(self.settings.timeout_s + 1.0)
        return self.stats

    # --- the thread ---

    def _run(self) -> None:
        with httpx.Client(timeout=self.settings.timeout_s) as client:
            while True:
                batch = self._collect()
                if batch:
                    try:
                        self._send(client, batch)
                    except Exception:  # never the thread's end: the next batch goes on
                        log.exception("OTLP export of %s events failed", len(batch))
                        self._count("failed", len(batch))
                elif self._closing.is_set():
                    break
        left = 0
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
                left += 1
        if left:
            self._count("dropped", left)

    def _collect(self) -> list[EvaluationEvent]:
        """Up to `batch_size` events: those that came within `flush_interval_s` of the first
        (at once while closing)."""
        s = self.settings
        batch: list[EvaluationEvent] = []
        deadline: float | None = None
        while len(batch) < s.batch_size and not self._abort.is_set():
            if self._closing.is_set():
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
                continue
            wait = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if wait <= 0:
                break
            try:
                batch.append(self._queue.get(timeout=wait))
            except queue.Empty:
                continue
            if deadline is None:
                deadline = time.monotonic() + s.flush_interval_s
        return batch

    def _send(self, client: httpx.Client, batch: list[EvaluationEvent]) -> None:
        s = self.settings
        try:
            body = self._encode(batch, s.resource)
        except (ValueError, TypeError) as exc:  # a malformed event
            log.error("OTLP export: %s events could not be encoded: %s", len(batch), exc)
            self._count("failed", len(batch))
            return
        headers = {**s.headers, "content-type": "application/x-protobuf"}
        for attempt in range(1, s.max_attempts + 1):
            retry_after: float | None = None
            try:
                response = client.post(s.endpoint, content=body, headers=headers)
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 300:
                    self._count("sent", len(batch))
                    return
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code not in RETRYABLE_STATUS and response.status_code < 500:
                    log.error("OTLP export to %s refused: %s", s.endpoint, problem)
                    self._count("failed", len(batch))
                    return
                retry_after = _retry_after(response.headers.get("retry-after"))
            if attempt == s.max_attempts or self._abort.is_set():
                break
            delay = random.uniform(0, min(s.backoff_max_s, s.backoff_base_s * 2 ** (attempt - 1)))
            if retry_after is not None:
                delay = max(delay, min(retry_after, s.backoff_max_s))
            log.warning("OTLP export to %s: %s; retrying in %.2fs", s.endpoint, problem, delay)
            self._retried()
            if self._abort.wait(delay):
                break
        log.error("OTLP export to %s failed for %s events: %s", s.endpoint, len(batch), problem)
        self._count("failed", len(batch))

    def count_failed(self, n: int) -> None:
        """Events that never reached the queue (they could not be made)."""
        self._count("failed", n)

    def _count(self, outcome: str, n: int) -> None:
        with self._lock:
            setattr(self.stats, outcome, getattr(self.stats, outcome) + n)
        if self._on_events is not None:
            self._on_events(self.settings.signal, outcome, n)

    def _retried(self) -> None:
        with self._lock:
            self.stats.retries += 1
        if self._on_retry is not None:
            self._on_retry()


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
