"""Gathering one episode's evidence for `evalstream episode`: from files or from Kafka.

Files that hold signals but no results are evaluated as `check` evaluates them (all the
files' signals, so episodes close on event time exactly as there); the episode's results
become the same records the worker publishes. Kafka is read by the key's partition only,
within a time window (evalstream/connectors/kafka/episode_lookup.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from evalstream.assertions.errors import InputError
from evalstream.assertions.evaluation.assembly import CloseRules
from evalstream.assertions.evaluation.records import episode_record, verdict_record
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.judge.protocol import Judge
from evalstream.assertions.reports.episode_timeline import EpisodeEvidence
from evalstream.assertions.suite_format.suites import Suite
from evalstream.assertions.wire.pricing import PricingTable
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.files.episode_evidence import file_signals, read_file_evidence
from evalstream.connectors.kafka.episode_lookup import KafkaLookup, lookup_episode, window_text
from evalstream.stream.offline import evaluate_signals
from evalstream.stream.settings import WorkerSettings


class EpisodeNotFoundError(InputError):
    """No record and no signal of the id where it was looked for."""


def evidence_from_files(
    paths: Sequence[str],
    episode_id: str,
    *,
    suites: Sequence[Suite],
    rules: CloseRules | None = None,
    pricing: PricingTable | None = None,
    judge: Judge | None = None,
) -> tuple[EpisodeEvidence, int]:
    """The episode's evidence and the number of input lines `check` would reject."""
    evidence = read_file_evidence(paths, episode_id)
    where = ", ".join(paths)
    if evidence.empty:
        raise EpisodeNotFoundError(f"episode {episode_id!r} is not in {where}{_others(evidence)}")
    if evidence.episodes or not evidence.signals:
        return evidence, 0
    if not suites:
        raise InputError(
            f"{where} holds the signals of episode {episode_id!r} but no results; pass "
            "--suite SUITE.yaml to evaluate them as `check` does"
        )
    report = evaluate_signals(
        file_signals(paths), suites, rules=rules, pricing=pricing, judge=judge
    )
    used: set[str] = set()
    for result in report.results:
        if result.episode_id != episode_id:
            continue
        instance = _first_signal(result, evidence.signals, used)
        evidence.episodes.append(episode_record(result, instance))
        evidence.verdicts.extend(_verdicts(result, instance))
    return evidence, len(report.rejected)


def _first_signal(result: EpisodeResult, signals: Sequence[Signal], used: set[str]) -> str | None:
    """The id of the signal that opened this result's instance (the first at its start)."""
    for signal in signals:
        if signal.ts == result.started_ts and signal.id not in used:
            used.add(signal.id)
            return signal.id
    return None


def _verdicts(result: EpisodeResult, instance: str | None) -> list[dict[str, object]]:
    out = []
    for outcome in result.assertions:
        record = verdict_record(
            result.episode_id, outcome, result.attrs, early=False, instance=instance
        )
        record["early"] = None  # an offline run does not tell early verdicts apart
        out.append(record)
    return out


async def evidence_from_kafka(
    settings: WorkerSettings, episode_id: str, since_ms: int, until_ms: int | None
) -> KafkaLookup:
    """The episode's records in the window; raises when the window is empty or the id is
    not in it, naming the partitions and offsets read."""
    topics = {kind: settings.topic(kind) for kind in ("episodes", "verdicts", "alerts", "signals")}
    lookup = await lookup_episode(settings.broker, topics, episode_id, since_ms, until_ms)
    window = window_text(since_ms, until_ms)
    read = "; ".join(s.describe() for s in lookup.scans)
    if lookup.window_empty:
        raise EpisodeNotFoundError(
            f"nothing in the window {window}: {read}; widen it with --since (e.g. --since 7d) "
            "or move --until"
        )
    lookup.evidence.where = f"{settings.broker} ({window})"
    if lookup.evidence.empty:
        raise EpisodeNotFoundError(
            f"episode {episode_id!r} not found at {settings.broker} in the window {window}: "
            f"read {read}{_others(lookup.evidence)}; check the id, or widen the window with "
            "--since (e.g. --since 7d)"
        )
    return lookup


def _others(evidence: EpisodeEvidence) -> str:
    if not evidence.other_ids:
        return ""
    return "; ids there include " + ", ".join(map(repr, evidence.other_ids))
