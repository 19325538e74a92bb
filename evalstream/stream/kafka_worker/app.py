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
- The signals topic is read in batches by an aiokafka group consumer of its own
  (`evalstream.stream.kafka_worker.signals_consumer`), not by a faust agent: faust's per-message
  path cost ~80 % of the time. faust runs everything else (the llm-calls and observations agents,
  timers, the leader's crontab) in the group `<app_id>-agents`.
- The worker commits, per signals partition, the first offset of the oldest episode still
  open there (or the next offset when none is), only after the outputs and closed-markers
  of everything before it were acknowledged by the broker. After a crash or a rebalance,
  consumption resumes at that offset and open episodes are rebuilt by replay.
- Closed episodes are marked in the compacted `closed` topic, in the partition of their
  signals (one write per episode, not per signal); a partition's markers are read back when
  it is assigned. Replayed signals of an episode closed before the resume point are
  skipped; a signal for a closed episode beyond its close offset is late and goes to the
  dead letters.
- Outputs carry stable dedupe keys; a replay re-publishes identical records.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import faust
import orjson
from aiokafka import AIOKafkaProducer

from evalstream.assertions.alerting.regression import RegressionDetector
from evalstream.assertions.errors import InputError, SignalDecodeError
from evalstream.assertions.evaluation.assembly import CloseReason
from evalstream.assertions.evaluation.records import DeadLetter
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.judge.protocol import Judge
from evalstream.assertions.kinds.base import CompileContext
from evalstream.assertions.scores.baselines import RollingBaselines
from evalstream.assertions.scores.stage import ScoredEpisode, ScoringStage, load_scoring_settings
from evalstream.assertions.suite_format.suites import Suite, SuiteSet
from evalstream.assertions.wire.pricing import PricingTable
from evalstream.connectors.codecs.llm_calls import llm_call_signals
from evalstream.connectors.kafka.batched_output import BatchedOutput
from evalstream.connectors.kafka.partitions import key_partition_lookup
from evalstream.stream.alerting import build_alert_sinks
from evalstream.stream.evaluation_export import evaluation_export
from evalstream.stream.judge import make_judge
from evalstream.stream.kafka_worker.allocator import keep_large_buffers
from evalstream.stream.kafka_worker.dead_letter_output import DeadLetterOutput
from evalstream.stream.kafka_worker.gc_schedule import (
    freeze_startup_objects,
    full_collection,
    schedule_full_collections,
)
from evalstream.stream.kafka_worker.partition_feed import (
    CONTROL_NAME,
    CONTROL_PREFIX,
    PartitionSink,
    PartitionState,
    feed_records,
)
from evalstream.stream.kafka_worker.signals_consumer import Records, SignalsConsumer
from evalstream.stream.pipeline import (
    ALERTS,
    BASELINES,
    DLQ,
    EPISODES,
    MAX_DEAD_LETTER_KEY_BYTES,
    OBSERVATIONS,
    RECORD_OVERHEAD_BYTES,
    VERDICTS,
    Envelope,
    InlineRegression,
    Pipeline,
    PublishedRegression,
    observation_from_record,
)
from evalstream.stream.settings import (
    COMPACTED_TOPICS,
    LOG_APPEND_TIME_TOPICS,
    TOPIC_NAMES,
    WorkerSettings,
)
from evalstream.stream.telemetry.metrics import PipelineMetrics

JSON = Any
log = logging.getLogger("evalstream.worker")


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
    partition_of: Callable[[bytes], int]  # a signals key's partition; known once started

    def __init__(  # noqa: PLR0915 - the wiring of every part, one statement each
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
        self.stage: ScoringStage | None = None
        self.regression: InlineRegression | None = None
        if scoring is not None:
            detector = RegressionDetector(scoring.regression)
            # The hold sees the streams this worker detects (all of them with one worker).
            self.stage = ScoringStage(scoring, self.baselines, detector.holding)
            self.regression = InlineRegression(detector, AwaitedSink(self), self.metrics)
        self.alert_sinks = build_alert_sinks(scoring, self.metrics) if scoring else None
        self.export = evaluation_export(settings.otlp_endpoint, settings.otlp_mode, self.metrics)
        self.states: dict[int, PartitionState] = {}
        self.rebalancing = True  # of the signals group: until partitions are assigned
        self.producer: Any = None  # aiokafka's, for the signals path; made on the app's loop
        self.output: BatchedOutput = BatchedOutput(None)  # replaced once the producer runs
        self.dead_letters = DeadLetterOutput(None, settings.topic("dlq"), self.metrics)  # too
        self.consumer: SignalsConsumer | None = None
        n = settings.partitions
        datadir = os.path.join(settings.data_dir, settings.app_id)
        os.makedirs(datadir, exist_ok=True)
        self.app = faust.App(
            f"{settings.app_id}-agents",
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
            producer_max_request_size=self.max_request_bytes,
        )
        app = self.app
        raw: dict[str, Any] = {"key_serializer": "raw", "value_serializer": "raw"}
        self.signals = app.topic(settings.topic("signals"), partitions=n, **raw)
        self.llm_calls = app.topic(settings.topic("llm-calls"), partitions=n, **raw)
        self.out_names = {
            stream: settings.topic(stream)
            for stream in (VERDICTS, EPISODES, DLQ, ALERTS, OBSERVATIONS, BASELINES)
        }
        self.out_topics = {
            stream: app.topic(name, partitions=n, **raw) for stream, name in self.out_names.items()
        }
        app.task(self._run_signals)
        app.agent(self.llm_calls, name="join-llm-calls", concurrency=1)(self._join_llm_calls)
        if self.regression is not None:
            app.agent(self.out_topics[OBSERVATIONS], name="detect", concurrency=1)(self._detect)
        if self.alert_sinks is not None:
            app.task(self._start_alert_sinks)
        if settings.nightly:
            # The episode-store workflow's nightly sweep, once per schedule for the whole group: on
            # the leader.
            app.crontab(settings.nightly_cron, on_leader=True)(self.run_nightly_sweep)
        app.timer(settings.sweep_interval_s, name="sweep")(self._sweep)
        app.timer(1.0, name="commit")(self._commit_timer)
        app.timer(5.0, name="lag")(self._report_lag)
        app.timer(settings.prune_interval_s, name="prune-markers")(self._prune_markers)
        app.timer(5.0, name="recovery-watchdog")(self._recovery_watchdog)
        if settings.full_gc_interval_s > 0:
            app.timer(settings.full_gc_interval_s, name="full-gc")(self._full_collection)
        self._rebalancing_since: float | None = None
        # Each partition's pipeline would overwrite the gauge; the worker's is their sum.
        self.metrics.open_episodes.set_function(
            lambda: sum(len(s.pipeline.assembler.open) for s in list(self.states.values()))
        )

    @property
    def max_request_bytes(self) -> int:
        """The producers' limit on one request (and so on one record)."""
        return max(self.settings.max_message_bytes * 2, 1_048_576)

    # --- per-partition state -----------------------------------------------------------

    def _new_state(self, partition: int, start: int) -> PartitionState:
        sink = PartitionSink(self)
        exporting = self.export.sink(sink) if self.export is not None else None
        pipeline = Pipeline(
            self.suites,
            exporting or sink,
            rules=self.settings.close_rules(),
            pricing=self.pricing,
            metrics=self.metrics,
            judge=self.judge,
            require_key=True,
            max_message_bytes=self.settings.max_message_bytes,
            max_dead_letter_bytes=self.dead_letters.limit,
            suite_set=self.suite_set,
            scoring=self.stage,
            regression=PublishedRegression(sink) if self.stage else None,
            on_scored=functools.partial(self._persist_baseline, sink),
            time_each_message=False,  # observed per fetched batch, in _evaluate_batch
        )
        if exporting is not None:
            exporting.watch(pipeline)
        state = PartitionState(partition, pipeline, next_offset=start)
        sink.state = state
        pipeline.on_result = lambda result: self._closed(state, result)
        return state

    async def run_nightly_sweep(self) -> int:
        """One nightly sweep with the settings file of `nightly`; returns its exit code."""
        from evalstream.stream.score_sweep import NightlySettings, run_nightly  # noqa: PLC0415

        assert self.settings.nightly is not None
        try:
            # One process: forking inside the worker (its exporter and metrics threads) is
            # not safe, whatever the sweep's files.
            sweep = NightlySettings.load(self.settings.nightly, {"workers": 1})
            result = await run_nightly(sweep, now=datetime.now(UTC))
        except InputError as exc:
            log.error("nightly sweep failed: %s", exc)
            return 2
        log.warning(
            "nightly sweep: %s episodes, exit code %s, report %s",
            result.run.episode_count,
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
        state.markers[episode_id] = marker
        state.unsent_markers.append((episode_id, marker))  # sent once the record is handled

    # --- the signals consumer --------------------------------------------------------------

    async def _run_signals(self) -> None:
        """The signals path, as a task of the faust app: consume batches until stopped."""
        settings = self.settings
        self.producer = AIOKafkaProducer(
            bootstrap_servers=settings.broker,
            acks="all",
            enable_idempotence=True,
            linger_ms=2,
            max_batch_size=256 * 1024,  # outputs go out a batch at a time (BatchedOutput)
            max_request_size=self.max_request_bytes,
        )
        await self.producer.start()
        self.output = BatchedOutput(self.producer)
        self.dead_letters.producer = self.producer
        await self._read_dead_letter_limit()
        self.dead_letters.ready.set()
        await self.output.add_topics([*self.out_names.values(), settings.topic("closed")])
        signals = await self.producer.partitions_for(settings.topic("signals"))
        self.partition_of = key_partition_lookup(signals)  # murmur2, as every producer's
        self.consumer = SignalsConsumer(
            settings.broker,
            settings.topic("signals"),
            settings.app_id,
            on_batch=self._evaluate_batch,
            on_assigned=self._on_assigned,
            on_revoked=self._on_revoked,
            max_fetch_bytes=settings.max_message_bytes,
        )
        try:
            await self.consumer.start()
            await self.consumer.run()
        finally:
            # A clean stop finishes the batch in progress, commits what is safe, then leaves
            # the group so the others take over at once.
            self.rebalancing = True
            try:
                await self.consumer.settle()
                await self._commit(force=True, locked=True)
            except Exception:
                log.exception("final commit failed; a replay covers it")
            await self.consumer.stop()
            await self.producer.stop()

    async def _read_dead_letter_limit(self) -> None:
        """A dead letter must fit the dead-letter topic's limit and the producer's."""
        from evalstream.connectors.kafka.topics import topic_max_message_bytes  # noqa: PLC0415

        topic = self.settings.topic("dlq")
        try:
            broker_limit = await topic_max_message_bytes(self.settings.broker, topic)
        except Exception as exc:  # the default limit then; a larger broker limit is unused
            log.warning("max.message.bytes of %s unknown (%s); assuming 1 MiB", topic, exc)
            broker_limit = None
        limit = broker_limit if broker_limit is not None else self.dead_letters.limit
        self.dead_letters.limit = min(limit, self.max_request_bytes)
        log.info("dead letters are kept under %s bytes", self.dead_letters.limit)

    async def _on_assigned(self, partitions: set[int]) -> None:
        self.rebalancing = False  # each partition's state is made on its first batch

    async def _open_partitions(self, partitions: list[int]) -> None:
        """Newly assigned partitions: each resumes at its committed offset, with its markers
        read back (one read of the `closed` topic for all of them)."""
        from evalstream.connectors.kafka.compacted_topic import read_latest_by_partition  # noqa: PLC0415

        assert self.consumer is not None
        markers = await read_latest_by_partition(
            self.settings.broker, self.settings.topic("closed"), partitions
        )
        for partition in partitions:
            start = await self.consumer.start_offset(partition)
            state = self.states[partition] = self._new_state(partition, start)
            for key, value in markers.get(partition, {}).items():
                state.markers[key.decode("utf-8", "replace")] = orjson.loads(value)
            log.info(
                "partition %s resumes at offset %s (%s closed-episode markers)",
                partition,
                start,
                len(state.markers),
            )

    async def _evaluate_batch(self, batch: Records) -> None:
        signals_topic = self.settings.topic("signals")
        assigned = self.consumer.assigned() if self.consumer is not None else set()
        new = sorted(p for p in batch if p not in self.states and p in assigned)
        if new:
            await self._open_partitions(new)
        for partition, records in batch.items():
            state = self.states.get(partition)
            if state is None:
                continue  # revoked meanwhile
            started = time.perf_counter()
            await feed_records(state, records, signals_topic, self)
            # This partition's outputs leave now; their acks gate its next commit.
            state.pending.extend(await self.output.flush())
            self.metrics.evaluation_latency.observe(time.perf_counter() - started)

    # --- PartitionHooks: what feed_records leaves to the worker --------------------------

    def seek(self, partition: int, offset: int) -> None:
        assert self.consumer is not None
        self.consumer.seek(partition, offset)

    async def send_markers(self, state: PartitionState) -> None:
        topic = self.settings.topic("closed")
        for episode_id, marker in state.unsent_markers:
            future = await self.output.append(
                topic, episode_id.encode(), orjson.dumps(marker), partition=state.partition
            )
            if future is not None:
                state.pending.append(future)
        state.unsent_markers = []

    async def control_or_closed(
        self, state: PartitionState, env: Envelope, episode_id: str
    ) -> bool:
        """Handles control records and signals of closed episodes; True when consumed."""
        if env.value.startswith(CONTROL_PREFIX):
            control = orjson.loads(env.value)
            if episode_id in state.pipeline.assembler.open:
                await state.pipeline.close(episode_id, CloseReason(control["reason"]))
            return True
        marker = state.markers.get(episode_id)
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
        self.metrics.rejected.labels(reason).inc()
        await self.dead_letters.ready.wait()  # the llm-calls agent may start first
        letter = DeadLetter(
            reason, text, message.topic, message.partition, message.offset, key, value
        )
        out_key = (
            key
            if key is not None and len(key) <= MAX_DEAD_LETTER_KEY_BYTES
            else letter.dedupe_key.encode()
        )
        budget = self.dead_letters.limit - RECORD_OVERHEAD_BYTES - len(out_key)
        # Awaited: the broker holds it (or it was given up) before faust commits the record.
        await (await self.dead_letters.send(out_key, letter.to_json(max_bytes=budget)))

    # --- timers ----------------------------------------------------------------------------

    async def _sweep(self) -> None:
        """Decide which episodes are due to close and log that decision as a control record.

        The clock of a partition is its stream time (the newest record timestamp read); the
        wall clock may only be used for a partition verifiably at the end of its log."""
        if self.rebalancing or self.consumer is None:
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
        try:
            ends = await self.consumer.end_offsets({s.partition for s in need_end})
        except Exception:  # unknown this round: decide by stream time only
            log.debug("end offsets unavailable", exc_info=True)
            return
        for state in need_end:
            end = ends.get(state.partition)
            if end is not None and state.next_offset >= end:
                await self._request_closes(state, state.pipeline.assembler.due(wall_ms), wall_ms)

    async def _request_closes(
        self, state: PartitionState, due: list[tuple[Any, CloseReason]], now: float
    ) -> None:
        """Logs each close decision as a control record in the episode's partition."""
        topic = self.settings.topic("signals")
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
            await self.producer.send(
                topic,
                orjson.dumps(control),
                episode.episode_id.encode(),
                partition=state.partition,
            )

    async def _recovery_watchdog(self) -> None:
        """Crashes a worker whose faust rebalance or recovery makes no progress.

        faust 0.15 can stall in recovery after a takeover ("No event received for active
        tp"); a fresh process recovers. Exiting lets the supervisor (compose's restart
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
            await self.app.crash(RuntimeError("rebalance or recovery stalled"))

    async def _full_collection(self) -> None:
        full_collection()  # (a timer with parameters would be handed the app)

    async def _prune_markers(self) -> None:
        """Deletes closed-episode markers no replay can need any more.

        A replay starts at the oldest open episode, which is at most `max_duration_ms` old;
        past that (plus `marker_retention_s` for late signals) a marker only costs memory
        and reassignment time, so it is deleted, with a tombstone in the compacted topic."""
        if self.rebalancing or self.producer is None:
            return
        horizon = time.time() - self.settings.marker_retention_s
        if self.settings.max_duration_ms is not None:
            horizon -= self.settings.max_duration_ms / 1000.0
        topic = self.settings.topic("closed")
        pruned = 0
        for state in list(self.states.values()):
            stale = [k for k, v in state.markers.items() if v.get("closed_at", 0) < horizon]
            for key in stale:
                del state.markers[key]
                await self.producer.send(topic, None, key.encode(), partition=state.partition)
            pruned += len(stale)
        if pruned:
            log.info("pruned %s closed-episode markers", pruned)

    async def _report_lag(self) -> None:
        """Consumer lag per assigned signals partition (a separate, slower timer)."""
        if self.rebalancing or self.consumer is None or not self.states:
            return
        topic = self.settings.topic("signals")
        try:
            ends = await self.consumer.end_offsets(set(self.states))
        except Exception:
            log.debug("end offsets unavailable for lag", exc_info=True)
            return
        for partition, end in ends.items():
            state = self.states.get(partition)
            if state is not None:
                self.metrics.consumer_lag.labels(topic, str(partition)).set(
                    max(0, end - state.next_offset)
                )

    async def _commit_timer(self) -> None:
        await self._commit()  # (a timer with parameters would be handed the app)

    async def _commit(
        self, only: set[int] | None = None, *, force: bool = False, locked: bool = False
    ) -> None:
        """Commits each partition's resume point once everything before it is acknowledged.

        The snapshot is taken between batches (under the consumer's lock, unless the caller
        holds it), where a partition's open episodes, markers and pending outputs agree."""
        consumer = self.consumer
        if consumer is None or (self.rebalancing and not force):
            return
        if locked:
            offsets, futures = self._commit_snapshot(only, consumer.assigned())
        else:
            async with consumer.lock:
                offsets, futures = self._commit_snapshot(only, consumer.assigned())
        if futures:
            await asyncio.gather(*futures)
            for state in list(self.states.values()):
                state.pending = [f for f in state.pending if not f.done()]
        if offsets and await consumer.commit(offsets):
            for partition, offset in offsets.items():
                committed = self.states.get(partition)
                if committed is not None:
                    committed.last_committed = offset

    def _commit_snapshot(
        self, only: set[int] | None, assigned: set[int]
    ) -> tuple[dict[int, int], list[asyncio.Future[Any]]]:
        offsets: dict[int, int] = {}
        futures: list[asyncio.Future[Any]] = []
        for state in list(self.states.values()):
            p = state.partition
            if (only is not None and p not in only) or p not in assigned:
                continue
            # Copied, not taken: a concurrent commit (a revocation during this one's wait)
            # must wait for them too before it commits.
            futures.extend(state.pending)
            resume = state.resume_offset()
            if resume != state.last_committed:
                offsets[p] = resume
        return offsets, futures

    async def _on_revoked(self, partitions: set[int]) -> None:
        """Called under the consumer's lock, between batches."""
        self.rebalancing = True
        try:
            await self._commit(only=partitions, force=True, locked=True)
        except Exception:  # never block a rebalance on this: replay covers it
            log.exception("commit on revocation failed")
        for p in partitions:
            self.states.pop(p, None)  # rebuilt by replay from the committed offset


def check_topics(loop: asyncio.AbstractEventLoop, settings: WorkerSettings) -> None:
    """Refuses a signals topic whose retention an open episode can outlive; warns about the
    rest of its configuration (evalstream/stream/kafka_worker/topic_checks.py)."""
    from evalstream.connectors.kafka.topics import topic_config  # noqa: PLC0415
    from evalstream.stream.kafka_worker.topic_checks import check_signals_topic  # noqa: PLC0415

    topic = settings.topic("signals")
    config = loop.run_until_complete(topic_config(settings.broker, topic))
    for warning in check_signals_topic(
        topic, config, max_duration_ms=settings.max_duration_ms, broker=settings.broker
    ):
        log.warning("%s", warning)


def run_worker(
    settings: WorkerSettings,
    suites: Sequence[Suite],
    *,
    pricing: PricingTable | None = None,
    loglevel: str = "WARNING",
) -> None:
    """Create the topics, serve /metrics and run the worker until it is stopped."""
    from prometheus_client import start_http_server  # noqa: PLC0415

    from evalstream.connectors.kafka.topics import ensure_topics  # noqa: PLC0415
    from evalstream.stream.kafka_worker.log_filters import quiet_coordinator_discovery  # noqa: PLC0415

    quiet_coordinator_discovery()  # no ERROR for a coordinator still being elected
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
            log_append_time=[settings.topic(name) for name in LOG_APPEND_TIME_TOPICS],
        )
    )
    check_topics(loop, settings)
    snapshots: list[bytes] = []
    if settings.scoring:
        from evalstream.connectors.kafka.compacted_topic import read_latest  # noqa: PLC0415

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
    # Everything made so far (modules, suites, faust) lives as long as the process: out of
    # the collector's sight, full collections only walk the episodes' objects (shorter pauses),
    # and run on the worker's timer, not every few seconds
    # (evalstream/stream/kafka_worker/gc_schedule.py).
    freeze_startup_objects()
    schedule_full_collections(settings.full_gc_interval_s)
    # fetch buffers reused, not faulted in afresh (evalstream/stream/kafka_worker/allocator.py)
    keep_large_buffers()
    runner = faust.Worker(worker.app, loglevel=loglevel, quiet=True, loop=loop)
    # faust's progress spinner sets the root logger to DEBUG at WARNING and above (it spins
    # on every record), so every debug call of aiokafka and faust built a log record: ~4 %
    # of a busy worker's time. No spinner: the root logger keeps the asked level.
    runner.spinner = None
    try:
        runner.execute_from_commandline()
    finally:
        if worker.export is not None:
            worker.export.close()  # what is queued goes out before the process ends
