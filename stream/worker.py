"""The Kafka worker (`evalstream worker`): the pipeline as a faust-streaming app.

Design (why it is safe under at-least-once delivery, crashes and rebalances):

- Open-episode state lives in memory, one pipeline per assigned partition of the signals
  topic. There is no changelog write per signal (that costs ~3,000 signals/s).
- One log per episode: LLM-call records are converted to `provider:*` signals and published
  into the signals topic (same key, so the same partition). Every time-based close (grace
  after the end signal, inactivity, maximum duration) is decided by a timer but carried out
  through a control record written into the episode's partition. Everything that shapes an
  episode is therefore in one partition's log, in order: replaying the log reproduces the
  same episodes, verdicts and records, byte for byte.
- faust does not ack or commit the signals topic (it is declared with `acks=False`). The
  worker commits, per partition, the first offset of the oldest episode still open there (or
  the next offset when none is), only after the outputs and closed-markers of everything
  before it were acknowledged by the broker. After a crash or a rebalance, consumption
  resumes at that offset and open episodes are rebuilt by replay.
- Closed episodes are marked in a faust table (one changelog write per episode, not per
  signal). Replayed signals of an episode closed before the resume point are skipped; a
  signal for a closed episode beyond its close offset is late and goes to the dead letters.
- Outputs carry stable dedupe keys; a replay re-publishes identical records.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import faust
import orjson
from faust.types import TP

from assertions.assembly import CloseReason
from assertions.baselines import RollingBaselines
from assertions.errors import InputError, SignalDecodeError
from assertions.judging import Judge
from assertions.kinds.base import CompileContext
from assertions.pricing import PricingTable
from assertions.records import DeadLetter
from assertions.regression import RegressionDetector
from assertions.results import EpisodeResult
from assertions.scoring_stage import ScoredEpisode, ScoringStage, load_scoring_settings
from assertions.suites import Suite, SuiteSet
from connectors.llm_call_codec import llm_call_signals
from stream.alerting import build_alert_sinks
from stream.judge import make_judge
from stream.metrics import PipelineMetrics
from stream.pipeline import (
    ALERTS,
    BASELINES,
    DLQ,
    EPISODES,
    OBSERVATIONS,
    VERDICTS,
    Envelope,
    InlineRegression,
    Pipeline,
    PublishedRegression,
    observation_from_record,
)
from stream.settings import COMPACTED_TOPICS, TOPIC_NAMES, WorkerSettings

JSON = Any
log = logging.getLogger("evalstream.worker")

CONTROL_NAME = "evalstream:close"  # reserved signal name of a control record
GAP_FATAL_S = 30.0  # a hole in a partition's offsets that no re-delivery repairs: restart


class KeepQueueTopic(faust.Topic):
    """A topic whose stream queue is not emptied when flow control resumes.

    faust empties every channel queue on `flow_control.resume()` at the end of a recovery,
    after the fetcher already handed over (and counted as read) records of the resumed
    partitions: those records would never reach the agent. Keeping them is safe here:
    stale-generation events are dropped and re-deliveries are skipped by offset.
    """

    @property
    def queue(self) -> Any:
        if self._queue is None:
            maxsize = self.maxsize or self.app.conf.stream_buffer_maxsize
            self._queue = self.app.FlowControlQueue(maxsize=maxsize, clear_on_resume=False)
        return self._queue


@dataclass
class PartitionState:
    partition: int
    pipeline: Pipeline
    next_offset: int
    first_offset: dict[str, int] = field(default_factory=dict)  # insertion = offset order
    stream_time_ms: float = 0.0
    pending: list[Awaitable[Any]] = field(default_factory=list)
    last_committed: int | None = None
    close_requested: set[str] = field(default_factory=set)
    gap_since: float | None = None
    current_offset: int = -1

    def resume_offset(self) -> int:
        for offset in self.first_offset.values():
            return offset  # the oldest open episode
        return self.next_offset


class PartitionSink:
    """Publishes a partition's outputs; their delivery futures gate the next commit."""

    def __init__(self, worker: Worker, state_ref: list[PartitionState]) -> None:
        self.worker = worker
        self.state_ref = state_ref

    async def publish(self, stream: str, key: str, record: dict[str, JSON]) -> None:
        topic = self.worker.out_topics[stream]
        future = await topic.send(key=key.encode(), value=orjson.dumps(record))
        if self.state_ref:
            self.state_ref[0].pending.append(future)
        if stream == ALERTS and self.worker.alert_sinks is not None:
            self.worker.alert_sinks.offer(record)


class AwaitedSink:
    """Publishes and waits for the broker's acknowledgement (outputs of the detect agent,
    whose input offset faust commits once the agent returns)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    async def publish(self, stream: str, key: str, record: dict[str, JSON]) -> None:
        topic = self.worker.out_topics[stream]
        await (await topic.send(key=key.encode(), value=orjson.dumps(record)))
        if stream == ALERTS and self.worker.alert_sinks is not None:
            self.worker.alert_sinks.offer(record)


class Worker:
    def __init__(
        self,
        settings: WorkerSettings,
        suites: Sequence[Suite],
        *,
        pricing: PricingTable | None = None,
        metrics: PipelineMetrics | None = None,
        judge: Judge | None = None,
        baseline_snapshots: Sequence[bytes] = (),
    ) -> None:
        self.settings = settings
        self.suites = list(suites)
        self.pricing = pricing
        self.metrics = metrics or PipelineMetrics()
        self.judge = judge
        self.suite_set = SuiteSet(self.suites, CompileContext(pricing) if pricing else None)
        # Scoring: one stage (and baseline store) for all of this worker's partitions.
        scoring = load_scoring_settings(settings.scoring) if settings.scoring else None
        self.baselines = scoring.baseline_store() if scoring else None
        if isinstance(self.baselines, RollingBaselines):
            for snapshot in baseline_snapshots:
                self.baselines.restore(orjson.loads(snapshot))
        self.stage = ScoringStage(scoring, self.baselines) if scoring else None
        self.regression: InlineRegression | None = None
        if scoring is not None:
            detector = RegressionDetector(scoring.regression)
            self.regression = InlineRegression(detector, AwaitedSink(self), self.metrics)
        self.alert_sinks = build_alert_sinks(scoring, self.metrics) if scoring else None
        self.states: dict[int, PartitionState] = {}
        self.anchors: dict[int, int] = {}
        self.min_generation = -(10**9)
        self._admin: Any = None
        n = settings.partitions
        datadir = os.path.join(settings.data_dir, settings.app_id)
        os.makedirs(datadir, exist_ok=True)
        self.app = faust.App(
            settings.app_id,
            broker=f"kafka://{settings.broker}",
            store="memory://",
            web_enabled=False,
            datadir=datadir,
            topic_partitions=n,
            table_standby_replicas=0,
            consumer_auto_offset_reset="earliest",  # a group without commits starts at 0
            broker_session_timeout=10.0,  # a killed member is evicted after 10 s, not 60
            broker_heartbeat_interval=1.0,
            broker_commit_interval=1.0,
            producer_acks=-1,
            producer_max_request_size=max(settings.max_message_bytes * 2, 1_048_576),
        )
        app = self.app
        raw: dict[str, Any] = {"key_serializer": "raw", "value_serializer": "raw"}
        self.signals = KeepQueueTopic(
            app, topics=[settings.topic("signals")], partitions=n, acks=False, **raw
        )
        self.llm_calls = app.topic(settings.topic("llm-calls"), partitions=n, **raw)
        self.out_topics = {
            VERDICTS: app.topic(settings.topic("verdicts"), partitions=n, **raw),
            EPISODES: app.topic(settings.topic("episodes"), partitions=n, **raw),
            DLQ: app.topic(settings.topic("dlq"), partitions=n, **raw),
            ALERTS: app.topic(settings.topic("alerts"), partitions=n, **raw),
            OBSERVATIONS: app.topic(settings.topic("observations"), partitions=n, **raw),
            BASELINES: app.topic(settings.topic("baselines"), partitions=n, **raw),
        }
        self.closed = app.Table("closed-episodes", default=None, partitions=n)
        app.agent(self.signals, name="evaluate", concurrency=1)(self._evaluate)
        app.agent(self.llm_calls, name="join-llm-calls", concurrency=1)(self._join_llm_calls)
        if self.regression is not None:
            app.agent(self.out_topics[OBSERVATIONS], name="detect", concurrency=1)(self._detect)
        if self.alert_sinks is not None:
            app.task(self._start_alert_sinks)
        if settings.nightly:
            # Seed 002's nightly sweep, once per schedule for the whole group: on the leader.
            app.crontab(settings.nightly_cron, on_leader=True)(self.run_nightly_sweep)
        app.timer(settings.sweep_interval_s, name="sweep")(self._sweep)
        app.timer(1.0, name="commit")(self._commit_timer)
        app.timer(5.0, name="lag")(self._report_lag)
        app.timer(settings.prune_interval_s, name="prune-markers")(self._prune_markers)
        app.timer(5.0, name="recovery-watchdog")(self._recovery_watchdog)
        self._rebalancing_since: float | None = None
        # mode types receivers as plain callables; an async bound method is what it calls.
        app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]
        # Each partition's pipeline would overwrite the gauge; the worker's is their sum.
        self.metrics.open_episodes.set_function(
            lambda: sum(len(s.pipeline.assembler.open) for s in list(self.states.values()))
        )

    # --- per-partition state -----------------------------------------------------------

    def _new_state(self, partition: int, start: int) -> PartitionState:
        ref: list[PartitionState] = []
        sink = PartitionSink(self, ref)
        pipeline = Pipeline(
            self.suites,
            sink,
            rules=self.settings.close_rules(),
            pricing=self.pricing,
            metrics=self.metrics,
            judge=self.judge,
            require_key=True,
            max_message_bytes=self.settings.max_message_bytes,
            suite_set=self.suite_set,
            scoring=self.stage,
            regression=PublishedRegression(sink) if self.stage else None,
            on_scored=functools.partial(self._persist_baseline, sink),
        )
        state = PartitionState(partition, pipeline, next_offset=start)
        ref.append(state)
        pipeline.on_result = lambda result: self._closed(state, result)
        return state

    async def run_nightly_sweep(self) -> int:
        """One nightly sweep with the settings file of `nightly`; returns its exit code."""
        from stream.score_sweep import NightlySettings, run_nightly  # noqa: PLC0415

        assert self.settings.nightly is not None
        try:
            sweep = NightlySettings.load(self.settings.nightly, {})
            result = await run_nightly(sweep, now=datetime.now(UTC))
        except InputError as exc:
            log.error("nightly sweep failed: %s", exc)
            return 2
        log.warning(
            "nightly sweep: %s episodes, exit code %s, report %s",
            len(result.run.episodes),
            result.exit_code,
            result.markdown_path,
        )
        return result.exit_code

    async def _start_alert_sinks(self) -> None:
        assert self.alert_sinks is not None
        await self.alert_sinks.start()  # background delivery tasks on the app's loop

    async def _persist_baseline(self, sink: PartitionSink, scored: ScoredEpisode) -> None:
        """The key's rolling window to the compacted baselines topic: it survives restarts."""
        key = scored.baseline_key
        if isinstance(self.baselines, RollingBaselines) and key is not None:
            snapshot = self.baselines.snapshot(key)
            if snapshot is not None:
                await sink.publish(BASELINES, str(key), snapshot)

    async def _detect(self, stream: Any) -> None:
        """Windowed regression detection; the observations topic is keyed by agent/variant,
        so each (agent, variant) window lives in exactly one worker."""
        assert self.regression is not None
        async for event in stream.events():
            value = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
            try:
                obs, now = observation_from_record(orjson.loads(value))
            except (orjson.JSONDecodeError, TypeError, KeyError, ValueError):
                log.warning("skipping a malformed observation record: %r", value[:200])
                continue
            await self.regression.observe(obs, now)

    def _closed(self, state: PartitionState, result: EpisodeResult) -> None:
        episode_id = result.episode_id
        state.first_offset.pop(episode_id, None)
        state.close_requested.discard(episode_id)
        marker = {
            "offset": state.current_offset,
            "closed_at": time.time(),
            "partition": state.partition,
        }
        self.closed.data[episode_id] = marker
        state.pending.append(self.closed.send_changelog(state.partition, episode_id, marker))

    async def _start_offset(self, partition: int) -> int:
        """The group's committed offset of a signals partition (the earliest if none)."""
        if partition not in self.anchors:
            await self._fetch_anchors(partition)
        if self.anchors[partition] < 0:  # no commit yet: start where the log starts
            tp = TP(self.settings.topic("signals"), partition)
            self.anchors[partition] = (await self.app.consumer.earliest_offsets(tp))[tp]
        return self.anchors[partition]

    async def _fetch_anchors(self, partition: int) -> None:
        """One offset fetch for every assigned partition (they are asked for together)."""
        from aiokafka import TopicPartition  # noqa: PLC0415 - only needed on (re)assignment
        from aiokafka.admin import AIOKafkaAdminClient  # noqa: PLC0415

        topic = self.settings.topic("signals")
        if self._admin is None:
            self._admin = AIOKafkaAdminClient(bootstrap_servers=self.settings.broker)
            await self._admin.start()
        assigned = {tp.partition for tp in self.app.consumer.assignment() if tp.topic == topic}
        parts = sorted(assigned | {partition})
        offsets = await self._admin.list_consumer_group_offsets(
            self.settings.app_id, partitions=[TopicPartition(topic, q) for q in parts]
        )
        for q in parts:
            meta = offsets.get(TopicPartition(topic, q))
            self.anchors[q] = meta.offset if meta is not None and meta.offset >= 0 else -1

    # --- the signals agent ---------------------------------------------------------------

    async def _evaluate(self, stream: Any) -> None:
        async for event in stream.events():
            await self._evaluate_event(event)

    async def _evaluate_event(self, event: Any) -> None:
        message = event.message
        generation = getattr(message, "generation_id", None)
        if generation is not None and generation < self.min_generation:
            return  # an event of a generation before the last rebalance
        partition, offset = message.partition, message.offset
        state = self.states.get(partition)
        if state is None:
            start = await self._start_offset(partition)
            state = self.states.get(partition)
            if state is None:
                state = self.states[partition] = self._new_state(partition, start)
                log.info("partition %s resumes at offset %s", partition, start)
        if offset < state.next_offset:
            return  # a re-delivery of what this generation already processed
        if offset > state.next_offset:
            # Never process past a hole: a restart replays from the safe committed offset.
            if state.gap_since is None:
                state.gap_since = time.monotonic()
                log.warning(
                    "partition %s: expected offset %s, got %s", partition, state.next_offset, offset
                )
            return
        state.gap_since = None
        state.next_offset = offset + 1
        state.current_offset = offset
        now_ms = float(message.timestamp) * 1000.0 if message.timestamp else time.time() * 1000.0
        state.stream_time_ms = max(state.stream_time_ms, now_ms)
        key = message.key if isinstance(message.key, bytes) else None
        value = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
        env = Envelope(self.settings.topic("signals"), value, key, partition, offset, int(now_ms))
        episode_id = key.decode("utf-8", "replace") if key is not None else None
        if episode_id is not None and await self._control_or_closed(state, env, episode_id):
            return
        await state.pipeline.handle(env, now=now_ms)
        opened = episode_id is not None and episode_id in state.pipeline.assembler.open
        if opened and episode_id not in state.first_offset:
            assert episode_id is not None
            state.first_offset[episode_id] = offset

    async def _control_or_closed(
        self, state: PartitionState, env: Envelope, episode_id: str
    ) -> bool:
        """Handles control records and signals of closed episodes; True when consumed."""
        if env.value.startswith(b'{"name":"' + CONTROL_NAME.encode()):
            control = orjson.loads(env.value)
            if episode_id in state.pipeline.assembler.open:
                await state.pipeline.close(episode_id, CloseReason(control["reason"]))
            return True
        marker = self.closed.data.get(episode_id)
        if marker is None or episode_id in state.pipeline.assembler.open:
            return False
        if env.offset is not None and env.offset <= marker["offset"]:
            return True  # replay of an episode that closed before the resume point
        state.pipeline.metrics.late.inc()
        await state.pipeline.dead_letter(
            env,
            "late",
            f"signal for episode {episode_id}, which closed at offset {marker['offset']}",
        )
        return True

    # --- the llm-calls agent: one log per episode ----------------------------------------

    async def _join_llm_calls(self, stream: Any) -> None:
        async for event in stream.events():
            message = event.message
            key = message.key if isinstance(message.key, bytes) else None
            value = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
            self.metrics.signals.labels(self.settings.topic("llm-calls")).inc()
            try:
                obj = orjson.loads(value)
                episode = key.decode("utf-8") if key is not None else None
                signals = llm_call_signals(obj, episode_id=episode)
            except (orjson.JSONDecodeError, UnicodeDecodeError) as exc:
                await self._dead_letter_raw(message, key, value, "invalid_json", str(exc))
                continue
            except SignalDecodeError as exc:
                await self._dead_letter_raw(message, key, value, exc.reason, exc.message)
                continue
            for sig in signals:
                # Awaited: the broker holds the signal before faust may commit this record.
                future = await self.signals.send(
                    key=sig.episode_id.encode(), value=orjson.dumps(sig.to_wire())
                )
                await future

    async def _dead_letter_raw(
        self, message: Any, key: bytes | None, value: bytes, reason: str, text: str
    ) -> None:
        env = Envelope(message.topic, value, key, message.partition, message.offset)
        self.metrics.rejected.labels(reason).inc()
        letter = DeadLetter(reason, text, env.topic, env.partition, env.offset, key, value)
        await self.out_topics[DLQ].send(
            key=(key or letter.dedupe_key.encode()), value=orjson.dumps(letter.to_json())
        )

    # --- timers ----------------------------------------------------------------------------

    async def _sweep(self) -> None:
        """Decide which episodes are due to close and log that decision as a control record.

        The clock of a partition is its stream time (the newest record timestamp read); the
        wall clock may only be used for a partition verifiably at the end of its log."""
        if self.app.rebalancing:
            return
        for state in list(self.states.values()):
            if state.gap_since is not None and time.monotonic() - state.gap_since > GAP_FATAL_S:
                await self.app.crash(
                    RuntimeError(f"unrepaired offset gap in partition {state.partition}")
                )
                return
        wall_ms = time.time() * 1000.0
        need_end: list[PartitionState] = []
        for state in list(self.states.values()):
            assembler = state.pipeline.assembler
            if not assembler.open:
                continue
            await self._request_closes(
                state, assembler.due(state.stream_time_ms), state.stream_time_ms
            )
            if wall_ms > state.stream_time_ms and assembler.due(wall_ms):
                need_end.append(state)  # only the wall clock says so: is the log drained?
        if not need_end:
            return
        topic = self.settings.topic("signals")
        try:
            ends = await self.app.consumer.highwaters(*[TP(topic, s.partition) for s in need_end])
        except Exception:  # unknown this round: decide by stream time only
            log.debug("end offsets unavailable", exc_info=True)
            return
        for state in need_end:
            end = ends.get(TP(topic, state.partition))
            if end is not None and state.next_offset >= end:
                await self._request_closes(state, state.pipeline.assembler.due(wall_ms), wall_ms)

    async def _request_closes(
        self, state: PartitionState, due: list[tuple[Any, CloseReason]], now: float
    ) -> None:
        """Logs each close decision as a control record in the episode's partition."""
        for episode, reason in due:
            if episode.episode_id in state.close_requested:
                continue
            state.close_requested.add(episode.episode_id)
            control = {
                "name": CONTROL_NAME,
                "episode_id": episode.episode_id,
                "reason": reason.value,
                "id": f"close-{episode.episode_id}",
                "timestamp": now,
            }
            await self.signals.send(
                key=episode.episode_id.encode(),
                value=orjson.dumps(control),
                partition=state.partition,
            )

    async def _recovery_watchdog(self) -> None:
        """Crashes a worker whose rebalance or table recovery makes no progress.

        faust 0.15 can stall in changelog recovery after a takeover ("No event received for
        active tp"); a fresh process recovers. Exiting lets the supervisor (compose's restart
        policy, systemd, Kubernetes) start one; the replay design loses nothing by it."""
        if not self.app.rebalancing:
            self._rebalancing_since = None
            return
        now = time.monotonic()
        if self._rebalancing_since is None:
            self._rebalancing_since = now
        elif now - self._rebalancing_since > self.settings.recovery_timeout_s:
            log.error(
                "rebalance/recovery stuck for %.0f s; exiting so a supervisor restarts the worker",
                now - self._rebalancing_since,
            )
            await self.app.crash(RuntimeError("rebalance or changelog recovery stalled"))

    async def _prune_markers(self) -> None:
        """Deletes closed-episode markers no replay can need any more.

        A replay starts at the oldest open episode, which is at most `max_duration_ms` old;
        past that (plus `marker_retention_s` for late signals) a marker only costs memory
        and recovery time, so it is deleted with a changelog tombstone."""
        if self.app.rebalancing:
            return
        horizon = time.time() - self.settings.marker_retention_s
        if self.settings.max_duration_ms is not None:
            horizon -= self.settings.max_duration_ms / 1000.0
        data = self.closed.data
        stale = [
            k
            for k, v in list(data.items())
            if isinstance(v, dict) and v.get("closed_at", 0) < horizon
        ]
        for key in stale:
            marker = data.pop(key)
            self.closed.send_changelog(marker.get("partition", 0), key, None)
        if stale:
            log.info("pruned %s closed-episode markers", len(stale))

    async def _report_lag(self) -> None:
        """Consumer lag per assigned signals partition (a separate, slower timer)."""
        if self.app.rebalancing or not self.states:
            return
        topic = self.settings.topic("signals")
        try:
            ends = await self.app.consumer.highwaters(*[TP(topic, p) for p in self.states])
        except Exception:
            log.debug("end offsets unavailable for lag", exc_info=True)
            return
        for tp, end in ends.items():
            state = self.states.get(tp.partition)
            if state is not None:
                self.metrics.consumer_lag.labels(topic, str(tp.partition)).set(
                    max(0, end - state.next_offset)
                )

    async def _commit_timer(self) -> None:
        await self._commit()  # (a timer with parameters would be handed the app)

    async def _commit(self, only: set[Any] | None = None, force: bool = False) -> None:
        if self.app.rebalancing and not force:
            return
        topic = self.settings.topic("signals")
        assignment = self.app.consumer.assignment()
        offsets: dict[Any, int] = {}
        futures: list[Awaitable[Any]] = []
        for state in list(self.states.values()):
            tp = TP(topic, state.partition)
            if (only is not None and tp not in only) or tp not in assignment:
                continue
            resume = state.resume_offset()  # snapshot with its pending futures, no await between
            futures.extend(state.pending)
            state.pending = []
            if resume != state.last_committed:
                offsets[tp] = resume
        if futures:
            await asyncio.gather(*futures)
        await self.app.producer.flush()
        # faust's public commit() commits acked offsets only; these are our resume points.
        if offsets and await self.app.consumer._commit(offsets):  # type: ignore[attr-defined]
            for tp, offset in offsets.items():
                committed = self.states.get(tp.partition)
                if committed is not None:
                    committed.last_committed = offset

    async def _on_revoked(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        revoked = kwargs.get("revoked", set())
        try:
            await self._commit(only=set(revoked), force=True)
        except Exception:  # never block a rebalance on this: replay covers it
            log.exception("commit on revocation failed")
        self.min_generation = self.app.consumer_generation_id + 1
        self.states.clear()  # rebuilt by replay from the committed offsets
        self.anchors.clear()


def run_worker(
    settings: WorkerSettings,
    suites: Sequence[Suite],
    *,
    pricing: PricingTable | None = None,
    loglevel: str = "WARNING",
) -> None:
    """Create the topics, serve /metrics and run the worker until it is stopped."""
    from prometheus_client import start_http_server  # noqa: PLC0415

    from connectors.kafka_topics import ensure_topics  # noqa: PLC0415

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # faust and mode run on this loop
    names = [settings.topic(name) for name in TOPIC_NAMES]
    loop.run_until_complete(
        ensure_topics(
            settings.broker,
            names,
            settings.partitions,
            settings.replication_factor,
            compacted=[settings.topic(name) for name in COMPACTED_TOPICS],
        )
    )
    snapshots: list[bytes] = []
    if settings.scoring:
        from connectors.compacted_topic import read_latest  # noqa: PLC0415

        latest = loop.run_until_complete(read_latest(settings.broker, settings.topic("baselines")))
        snapshots = list(latest.values())
        log.info("restored %s rolling baselines", len(snapshots))
    metrics = PipelineMetrics()
    if settings.metrics_port:
        start_http_server(
            settings.metrics_port, addr=settings.metrics_host, registry=metrics.registry
        )
    worker = Worker(
        settings,
        suites,
        pricing=pricing,
        metrics=metrics,
        baseline_snapshots=snapshots,
        judge=make_judge(metrics, pricing=pricing),
    )
    faust.Worker(worker.app, loglevel=loglevel, quiet=True, loop=loop).execute_from_commandline()
