"""The processing pipeline: decode -> assemble -> evaluate -> emit, for any transport.

Plain async code with an injected sink, clock, metrics and judge. The embedded runtime drives
it from in-process queues and the Faust worker from Kafka topics; `evalstream check` drives the
same assembler and engine from files. Nothing about evaluation differs between them.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import orjson

from evalstream.assertions.alerting.alert_rules import EpisodeAlert, Severity
from evalstream.assertions.alerting.regression import METRICS as REGRESSION_METRICS
from evalstream.assertions.alerting.regression import (
    AlertEvent,
    AlertState,
    Observation,
    RegressionDetector,
)
from evalstream.assertions.errors import SignalDecodeError
from evalstream.assertions.evaluation.assembly import (
    Accept,
    ClosedEpisode,
    CloseReason,
    CloseRules,
    EpisodeAssembler,
)
from evalstream.assertions.evaluation.records import (
    DeadLetter,
    episode_key,
    episode_record,
    verdict_record,
)
from evalstream.assertions.evaluation.results import EpisodeResult, describe_error
from evalstream.assertions.judge.protocol import Judge
from evalstream.assertions.kinds.base import CompileContext
from evalstream.assertions.scores.dimensions import DIMENSIONS
from evalstream.assertions.scores.stage import ScoredEpisode, ScoringStage
from evalstream.assertions.suite_format.suites import Suite, SuiteSet
from evalstream.assertions.wire.pricing import PricingTable, default_pricing
from evalstream.assertions.wire.signals import Signal, signal_from_obj
from evalstream.connectors.codecs.llm_calls import llm_call_signals
from evalstream.stream.offline import resolve_judgements
from evalstream.stream.telemetry.exemplars import EpisodeExemplar, episode_exemplar
from evalstream.stream.telemetry.metrics import PipelineMetrics

JSON = Any
log = logging.getLogger(__name__)
VERDICTS, EPISODES, ALERTS, DLQ = "verdicts", "episodes", "alerts", "dlq"
# Internal streams of the worker: scored episodes for the regression windows, and rolling
# baseline snapshots (a compacted topic keyed by baseline key).
OBSERVATIONS, BASELINES = "observations", "baselines"
ALERT_DIMENSIONS = (*DIMENSIONS, "overall")
DEFAULT_MAX_MESSAGE_BYTES = 1_048_576
# What a Kafka record adds to its key and value (batch header, record header, varints),
# rounded up: a dead letter's JSON gets the broker's limit minus this and its key.
RECORD_OVERHEAD_BYTES = 512
# A dead letter is keyed by the original key, unless that is absurdly long.
MAX_DEAD_LETTER_KEY_BYTES = 4096


class RegressionHook(Protocol):
    """Where scored episodes go for windowed regression detection (`now` in epoch ms)."""

    async def observe(self, obs: Observation, now: float) -> None: ...


class Sink(Protocol):
    """Where output records go: `stream` is one of verdicts / episodes / alerts / dlq."""

    async def publish(self, stream: str, key: str, record: dict[str, JSON]) -> None: ...


@dataclasses.dataclass(slots=True)
class Envelope:
    """One raw input message and where it came from (for dead letters and offsets)."""

    topic: str
    value: bytes
    key: bytes | None = None
    partition: int | None = None
    offset: int | None = None
    timestamp_ms: int | None = None

    def __repr__(self) -> str:
        return (
            f"Envelope(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
            f"key={self.key!r}, {len(self.value)} bytes)"
        )


class MemorySink:
    """Collects records in lists; for tests and the embedded runtime's printer."""

    def __init__(self) -> None:
        self.records: dict[str, list[tuple[str, dict[str, JSON]]]] = {
            VERDICTS: [],
            EPISODES: [],
            ALERTS: [],
            DLQ: [],
        }

    async def publish(self, stream: str, key: str, record: dict[str, JSON]) -> None:
        self.records[stream].append((key, record))


def wall_clock_ms() -> float:
    return time.time() * 1000.0


class Pipeline:
    def __init__(
        self,
        suites: list[Suite],
        sink: Sink,
        *,
        rules: CloseRules | None = None,
        pricing: PricingTable | None = None,
        metrics: PipelineMetrics | None = None,
        judge: Judge | None = None,
        clock: Callable[[], float] = wall_clock_ms,
        llm_topics: frozenset[str] = frozenset({"llm-calls"}),
        require_key: bool = False,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_dead_letter_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        on_result: Callable[[EpisodeResult], None] | None = None,
        event_time: bool = False,
        suite_set: SuiteSet | None = None,
        scoring: ScoringStage | None = None,
        regression: RegressionHook | None = None,
        on_scored: Callable[[ScoredEpisode], Awaitable[None]] | None = None,
        time_each_message: bool = True,
    ) -> None:
        """`event_time`: drive grace and inactivity by the input's own timestamps (a replay of a
        finite recording, exactly as `evalstream check` does) instead of the wall clock.
        `time_each_message`: observe the evaluation-latency histogram per message (a batch
        of one); a caller that handles batches (the Kafka worker) observes per batch.
        `max_dead_letter_bytes`: the largest message the dead-letter topic takes (key, value
        and record overhead); a dead letter that would be larger keeps only a prefix of the
        original bytes, with their size and SHA-256."""
        self.pricing = pricing or default_pricing()
        # Pipelines of one process may share a suite set: plans compile once.
        self.suite_set = suite_set or SuiteSet(suites, CompileContext(self.pricing))
        self.assembler = EpisodeAssembler(
            self.suite_set.plan_for, rules, self.pricing, selection=self.suite_set
        )
        self.sink = sink
        self.metrics = metrics or PipelineMetrics(process=False)
        self.judge = judge
        self.clock = clock
        self.llm_topics = llm_topics
        self.require_key = require_key
        self.max_message_bytes = max_message_bytes
        self.max_dead_letter_bytes = max_dead_letter_bytes
        self.on_result = on_result
        self.event_time = event_time
        self.scoring = scoring
        # (agent, variant) label pairs whose alert counters exist (at 0 until one fires), so
        # a rate over them reads 0 rather than no data for an agent that never alerted.
        self._alert_labels: set[tuple[str, str]] = set()
        self.regression = regression
        self.on_scored = on_scored
        self.time_each_message = time_each_message
        self._consumed: dict[str, Any] = {}  # topic -> its counter child (labels() is slow)
        self._children: dict[tuple[Any, ...], Any] = {}  # (metric, *labels) -> child
        # What `ingest` left for `flush`: dead letters in order, or a multi-signal message.
        self._dead: list[tuple[Envelope, str, str]] = []
        self._deferred: tuple[Envelope, float | None] | None = None
        self._open_reported = -1
        self._watermark = float("-inf")
        self._last_sweep = float("-inf")

    # --- input ---------------------------------------------------------------------------

    async def handle(self, env: Envelope, now: float | None = None) -> list[Signal]:
        """Decode one raw message and process it; bad input goes to the dead-letter sink.

        `now` overrides the clock for this message (the Kafka worker passes the record's
        timestamp, so closing decisions follow the log). Returns the signals it carried."""
        started = time.perf_counter()
        self.count_consumed(env.topic, 1)
        try:
            signals = self.decode(env)
        except SignalDecodeError as exc:
            await self.dead_letter(env, exc.reason, exc.message)
            return []
        for sig in signals:
            if self._feed(sig, env, now):
                await self.flush()
        if self.time_each_message:
            self.metrics.evaluation_latency.observe(time.perf_counter() - started)
        return signals

    async def handle_batch(
        self, envs: Sequence[Envelope], nows: Sequence[float] | None = None
    ) -> None:
        """`handle` for each message in order, with the same outputs in the same order, but
        awaiting only where a message left output, and counting consumed signals once per
        batch. `nows[i]` is message i's `now` (None: the clock, as `handle` without it)."""
        started = time.perf_counter()
        ingest = self.ingest
        done = 0
        try:
            if nows is None:
                for env in envs:
                    done += 1
                    if ingest(env, None):
                        await self.flush()
            else:
                for env, now in zip(envs, nows, strict=True):
                    done += 1
                    if ingest(env, now):
                        await self.flush()
        finally:
            topics = {env.topic for env in envs[:done]}
            for topic in topics:
                n = done if len(topics) == 1 else sum(1 for e in envs[:done] if e.topic == topic)
                self.count_consumed(topic, n)
        if self.time_each_message:
            self.metrics.evaluation_latency.observe(time.perf_counter() - started)

    def ingest(self, env: Envelope, now: float | None = None) -> bool:
        """The synchronous part of handling one message (consumed signals are not counted:
        see `count_consumed`). True when it left output: `await flush()` before the next
        message, so outputs keep exactly the order `handle` gives them."""
        if env.topic in self.llm_topics:
            self._deferred = (env, now)  # several signals, each followed by its outputs
            return True
        try:
            sig = self.decode_signal(env)
        except SignalDecodeError as exc:
            self._dead.append((env, exc.reason, exc.message))
            return True
        return self._feed(sig, env, now)

    async def flush(self) -> None:
        """Publishes what the last `ingest` left: dead letters, then verdicts and episodes."""
        deferred = self._deferred
        if deferred is not None:
            self._deferred = None
            env, now = deferred
            try:
                signals = self.decode(env)
            except SignalDecodeError as exc:
                await self.dead_letter(env, exc.reason, exc.message)
                return
            for sig in signals:
                if self._feed(sig, env, now):
                    await self.flush()
            return
        dead = self._dead
        if dead:
            self._dead = []
            for env, reason, message in dead:
                await self.dead_letter(env, reason, message)
        await self._emit_pending()

    def count_consumed(self, topic: str, n: int) -> None:
        consumed = self._consumed.get(topic)
        if consumed is None:
            consumed = self._consumed[topic] = self.metrics.signals.labels(topic)
        consumed.inc(n)

    def _child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, cached: labels() validates and locks on every call."""
        key = (metric, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def decode(self, env: Envelope) -> list[Signal]:
        if env.topic not in self.llm_topics:
            return [self.decode_signal(env)]
        key, obj = self._key_and_object(env)
        signals = llm_call_signals(obj, episode_id=key)
        if key is not None and any(s.episode_id != key for s in signals):
            raise _key_mismatch(key, signals[0].episode_id)
        return signals

    def decode_signal(self, env: Envelope) -> Signal:
        """One message of a signals topic (not an LLM-call topic) -> its signal."""
        key, obj = self._key_and_object(env)
        sig = signal_from_obj(obj, episode_id=key)
        if key is not None and sig.episode_id != key:
            raise _key_mismatch(key, sig.episode_id)
        return sig

    def _key_and_object(self, env: Envelope) -> tuple[str | None, JSON]:
        value = env.value
        if len(value) > self.max_message_bytes:
            raise SignalDecodeError(
                "oversized", f"message of {len(value)} bytes exceeds {self.max_message_bytes}"
            )
        key: str | None = None
        if env.key is not None:
            try:
                key = env.key.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SignalDecodeError("bad_key", "message key is not UTF-8") from exc
        elif self.require_key:
            raise SignalDecodeError(
                "missing_key", "message has no key; key every message by its episode id"
            )
        try:
            return key, orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            reason = "undecodable" if _not_utf8(value) else "invalid_json"
            raise SignalDecodeError(reason, f"not a JSON document: {exc}") from exc

    def now(self) -> float:
        return self._watermark if self.event_time else self.clock()

    async def handle_signal(
        self, sig: Signal, env: Envelope | None = None, now: float | None = None
    ) -> None:
        if self._feed(sig, env, now):
            await self.flush()

    def _feed(self, sig: Signal, env: Envelope | None, now: float | None) -> bool:
        """Assembles one signal; True when it left output to publish (see `flush`)."""
        asm = self.assembler
        if now is None:
            if self.event_time:
                self._watermark = max(self._watermark, sig.ts)
                if self._watermark - self._last_sweep >= 1_000.0:
                    asm.sweep(self._watermark)
                    self._last_sweep = self._watermark
            now = self.now()
        try:
            status = asm.feed(sig, now)
        except Exception as exc:  # the assembler isolates evaluation; this is the rest
            return self._unfed(sig, env, exc)
        if status:  # not Accept.ACCEPTED
            return self._rejected(sig, env, status)
        if asm.early or asm.ready:
            return True
        if len(asm.open) != self._open_reported:
            self._open_reported = len(asm.open)
            self.metrics.open_episodes.set(self._open_reported)
        return False

    def _unfed(self, sig: Signal, env: Envelope | None, exc: Exception) -> bool:
        """Feeding `sig` raised outside its episode's evaluation: the episode, when open,
        closes as `error`; otherwise the signal goes to the dead letters. Others go on."""
        if self.assembler.fail(sig.episode_id, exc):
            return True  # reported (logged, counted) as it is emitted
        self._child(self.metrics.episode_errors, "input").inc()
        log.error("signal %s of episode %r could not be fed", sig.id, sig.episode_id, exc_info=exc)
        self._dead.append(
            (
                env or Envelope("signals", orjson.dumps(sig.to_wire())),
                "episode_error",
                f"signal {sig.id} ({sig.name}) could not be fed: {describe_error(exc)}",
            )
        )
        return True

    def _rejected(self, sig: Signal, env: Envelope | None, status: Accept) -> bool:
        """A duplicate (counted) or a late signal (counted, to the dead letters)."""
        if status is Accept.DUPLICATE:
            self.metrics.duplicates.inc()
        else:
            self.metrics.late.inc()
            self._dead.append(
                (
                    env or Envelope("signals", orjson.dumps(sig.to_wire())),
                    "late",
                    f"signal {sig.id} ({sig.name}) arrived after episode {sig.episode_id} closed",
                )
            )
        return True

    async def dead_letter(self, env: Envelope, reason: str, message: str) -> None:
        self._child(self.metrics.rejected, reason).inc()
        letter = DeadLetter(
            reason,
            message,
            env.topic,
            env.partition,
            env.offset,
            env.key,
            env.value,
            env.timestamp_ms,
        )
        raw = env.key
        if raw is None or len(raw) > MAX_DEAD_LETTER_KEY_BYTES:
            key = letter.dedupe_key
        else:
            key = raw.decode("utf-8", "replace")
        budget = self.max_dead_letter_bytes - RECORD_OVERHEAD_BYTES - len(key.encode())
        await self.sink.publish(DLQ, key, letter.to_json(max_bytes=budget))

    # --- time ----------------------------------------------------------------------------

    async def tick(self) -> None:
        """Close what is due by the clock (grace periods, inactivity, maximum duration)."""
        if not self.event_time:
            self.assembler.sweep(self.clock())
        await self._emit_pending()

    async def close(self, episode_id: str, reason: CloseReason) -> bool:
        """Close one episode now (the worker does this when its control record is read)."""
        closed = self.assembler.close(episode_id, reason)
        await self._emit_pending()
        return closed

    async def drain(self) -> None:
        """The input ended: close every open episode."""
        self.assembler.flush()
        await self._emit_pending()

    # --- output --------------------------------------------------------------------------

    async def _emit_pending(self) -> None:
        asm = self.assembler
        if asm.early:
            now_s = time.time()
            for early in asm.drain_early():
                ep = early.episode
                try:
                    outcome = ep.evaluation.result_of(early.top_index)
                    record = verdict_record(
                        ep.episode_id, outcome, ep.attrs, early=True, instance=ep.first_signal_id
                    )
                except Exception:  # the verdict is still in the episode's record at close
                    self._child(self.metrics.episode_errors, "early_verdict").inc()
                    log.exception("early verdict of episode %r not reported", ep.episode_id)
                    continue
                await self.sink.publish(VERDICTS, ep.episode_id, record)
                self.metrics.verdict_delay.observe(max(0.0, now_s - early.signal.ts / 1000.0))
        if asm.ready:
            await self._emit_closed(asm.drain_ready())
        if len(asm.open) != self._open_reported:
            self._open_reported = len(asm.open)
            self.metrics.open_episodes.set(self._open_reported)

    async def _emit_closed(self, closed: list[ClosedEpisode]) -> None:
        await resolve_judgements(closed, self.judge)
        for c in closed:
            if c.error is None:
                try:
                    await self._emit_episode(c)
                    continue
                except Exception as exc:  # this episode's alone: reported as `error`
                    c.error = describe_error(exc)
                    stage = "report"
                    log.exception("episode %r could not be reported", c.episode.episode_id)
            else:
                stage = "evaluate"
                log.error("episode %r could not be evaluated: %s", c.episode.episode_id, c.error)
            self._child(self.metrics.episode_errors, stage).inc()
            await self._emit_error(c)

    async def _emit_error(self, c: ClosedEpisode) -> None:
        """The `error` record of an episode that could not be evaluated or reported. Raises
        only when the sink does (the transport, not this episode)."""
        result = c.error_result()
        await self.sink.publish(
            EPISODES, result.episode_id, episode_record(result, c.episode.first_signal_id)
        )
        exemplar = episode_exemplar(
            result.episode_id, result.attrs, c.episode.first_signal_id, time.time()
        )
        self.metrics.episodes.inc((result.close_reason, result.status), 1.0, exemplar)
        if self.on_result is not None:
            self.on_result(result)

    async def _emit_episode(self, c: ClosedEpisode) -> None:
        lead_time, verdicts = self.metrics.lead_time, self.metrics.verdicts
        result = c.result()
        instance = c.episode.first_signal_id
        ended = result.ended_ts
        # The episode behind every per-episode observation below (OpenMetrics exemplars).
        exemplar = episode_exemplar(result.episode_id, result.attrs, instance, time.time())
        for outcome in result.assertions:
            early = outcome.decided_at is not None
            if not early:
                record = verdict_record(
                    result.episode_id, outcome, result.attrs, early=False, instance=instance
                )
                await self.sink.publish(VERDICTS, result.episode_id, record)
            elif ended is not None and outcome.decided_ts is not None:
                lead = max(0.0, (ended - outcome.decided_ts) / 1000.0)
                lead_time.observe((outcome.type,), lead, exemplar)
            verdicts.inc(
                (
                    outcome.suite,
                    outcome.type,
                    outcome.verdict.value,
                    "true" if early else "false",
                ),
                1.0,
                exemplar,
            )
        record = episode_record(result, instance)
        if self.scoring is not None:
            scored = self.scoring.score(result, c.evaluation.facts.tool_names())
            record.update(scored.record_fields())
            await self._emit_scored(result, scored, instance, exemplar)
        await self.sink.publish(EPISODES, result.episode_id, record)
        self.metrics.episodes.inc((result.close_reason, result.status), 1.0, exemplar)
        if self.on_result is not None:
            self.on_result(result)

    async def _emit_scored(
        self,
        result: EpisodeResult,
        scored: ScoredEpisode,
        instance: str,
        exemplar: EpisodeExemplar,
    ) -> None:
        obs = scored.observation
        labels = self.metrics.agent_labels
        agent, variant = labels(obs.agent_id), labels(obs.variant)
        values = {**scored.scores.dimensions(), "overall": scored.scores.overall}
        for name, value in values.items():
            if value is not None:
                self.metrics.scores.observe((name, agent, variant), value, exemplar)
        for name, delta in (
            ("cost", scored.scores.cost_delta_pct),
            ("latency", scored.scores.latency_delta_pct),
        ):
            if delta is not None:
                self.metrics.baseline_delta.observe((name, agent, variant), delta, exemplar)
        if (agent, variant) not in self._alert_labels:
            self._alert_labels.add((agent, variant))
            for severity in Severity:
                for dimension in ALERT_DIMENSIONS:
                    self.metrics.episode_alerts.touch((severity.value, dimension, agent, variant))
        for alert in scored.alerts:
            self.metrics.episode_alerts.inc(
                (alert.severity.value, alert.dimension, agent, variant), 1.0, exemplar
            )
            record = episode_alert_record(alert, obs)
            record["dedupe_key"] = f"{episode_key(alert.episode_id, instance)}/{alert.dimension}"
            await self.sink.publish(ALERTS, result.episode_id, record)
        if self.on_scored is not None:
            await self.on_scored(scored)
        if self.regression is not None:
            now = result.ended_ts if result.ended_ts is not None else self.now()
            await self.regression.observe(obs, now)


class InlineRegression:
    """Windowed detection in this process: events go to the alerts stream of `sink`."""

    def __init__(self, detector: RegressionDetector, sink: Sink, metrics: PipelineMetrics) -> None:
        self.detector = detector
        self.sink = sink
        self.metrics = metrics
        # alert key -> the (severity, agent, variant) labels it is counted under
        self.counted: dict[str, tuple[str, str, str]] = {}
        self.streams: set[tuple[str, str]] = set()  # label pairs whose gauges exist

    async def observe(self, obs: Observation, now: float) -> None:
        labels = self.metrics.agent_labels
        pair = (labels(obs.agent_id), labels(obs.variant))
        if pair not in self.streams:  # every severity and metric at 0 from the first episode
            self.streams.add(pair)
            for severity in Severity:
                for metric in REGRESSION_METRICS:
                    self.metrics.alerts_firing.labels(severity.value, metric, *pair).set(0)
        for event in self.detector.observe(obs, now):
            await self.sink.publish(ALERTS, event.dedupe_key, regression_alert_record(event))
            self._count(event)

    def _count(self, event: AlertEvent) -> None:
        """Keeps the firing gauge right through severity changes of one alert."""
        firing = self.metrics.alerts_firing
        key = event.dedupe_key
        counted = self.counted.pop(key, None)
        if counted is not None:
            severity, agent, variant = counted
            firing.labels(severity, event.metric, agent, variant).dec()
        if event.state is not AlertState.RESOLVED:
            labels = self.metrics.agent_labels
            now_counted = (event.severity.value, labels(event.agent_id), labels(event.variant))
            self.counted[key] = now_counted
            severity, agent, variant = now_counted
            firing.labels(severity, event.metric, agent, variant).inc()


class PublishedRegression:
    """Windowed detection elsewhere: observations go to the `observations` stream, keyed by
    `agent_id/variant`, so one consumer holds each (agent, variant) window (the worker)."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    async def observe(self, obs: Observation, now: float) -> None:
        record = {**dataclasses.asdict(obs), "now": now}
        await self.sink.publish(OBSERVATIONS, f"{obs.agent_id}/{obs.variant}", record)


def observation_from_record(record: dict[str, JSON]) -> tuple[Observation, float]:
    fields = {k: v for k, v in record.items() if k != "now"}
    return Observation(**fields), float(record["now"])


def episode_alert_record(alert: EpisodeAlert, obs: Observation) -> dict[str, JSON]:
    return {
        "kind": "episode",
        **alert.to_json(),
        "agent_id": obs.agent_id,
        "variant": obs.variant,
    }


def regression_alert_record(event: AlertEvent) -> dict[str, JSON]:
    """The record of one lifecycle event; `alert_key` names the alert across its events,
    `dedupe_key` this event (a re-delivery of the same event has the same one)."""
    body = event.to_json()
    return {
        "kind": "regression",
        **body,
        "alert_key": event.dedupe_key,
        "dedupe_key": f"{event.dedupe_key}/{event.state.value}/{event.fired_at:.0f}/{event.at:.0f}",
    }


def _key_mismatch(key: str, episode_id: str) -> SignalDecodeError:
    return SignalDecodeError(
        "key_mismatch",
        f"message key {key!r} differs from its episode_id {episode_id!r}; "
        "the key decides the partition, so both must be the episode id",
    )


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False
