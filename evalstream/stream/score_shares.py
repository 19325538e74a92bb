"""Sharding a scoring run by agent: which process owns an episode, and merging the shares.

Every piece of a scoring run's state lives per agent (a rolling baseline per agent and case,
a regression stream per agent and variant, fixed baselines read-only), so a run split by
agent across processes scores each episode exactly as one process would — as long as no
stream or key is evicted (the caller checks the input's counts against the caps) and no
episode id is listed twice (which copy counts depends on every copy). Each
share tags its records with their place in the whole run (an episode and the regression
events it raised by its (start, episode id); a rejected or skipped input by its position),
so `merge_shares` rebuilds one process's lists, in one process's order.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalstream.assertions.alerting.alert_rules import EpisodeAlert
from evalstream.assertions.alerting.regression import AlertEvent
from evalstream.assertions.scores.dimensions import EpisodeScores, ScoringInput
from evalstream.assertions.scores.run import Place, Rejected, ScoredEpisode
from evalstream.assertions.scores.run_tally import RunTally
from evalstream.assertions.scores.safety import SafetyResult
from evalstream.stream.process_shards import pickle_fields_directly

JSON = Any
EpisodeKey = Place  # the episode's start, its id: the run's scoring order
# (0, input position, "") read-time rejections come first, in input order;
# (1, start, episode id) rejections while scoring, in scoring order.
RejectionTag = tuple[int, float, str]

pickle_fields_directly(
    ScoredEpisode, ScoringInput, EpisodeScores, SafetyResult, EpisodeAlert, AlertEvent, Rejected
)


@dataclass
class Share:
    """Shard `index` of `count`: agents are dealt to the shards in the order they first
    appear (every process reads the same input, so all deal alike, and many agents of
    similar traffic spread evenly); an episode belongs to its agent's shard."""

    index: int = 0
    count: int = 1
    _agents: dict[str, int] = field(default_factory=dict, repr=False)

    def owns(self, obj: JSON) -> bool:
        return self.count == 1 or self.shard_of(obj) == self.index

    def shard_of(self, obj: JSON) -> int:
        agent = obj.get("agent_id") if isinstance(obj, Mapping) else None
        if not isinstance(agent, str):
            return 0  # rejected by shard 0
        agents = self._agents
        return agents.setdefault(agent, len(agents) % self.count)


@dataclass
class ShareResult:
    """One share's records, each list with the tags that place it in the whole run."""

    episodes: list[ScoredEpisode] = field(default_factory=list)
    episode_keys: list[EpisodeKey] = field(default_factory=list)
    episode_json: list[bytes] = field(default_factory=list)  # each record, rendered
    regressions: list[AlertEvent] = field(default_factory=list)
    regression_keys: list[EpisodeKey] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    rejected_at: list[RejectionTag] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    skipped_at: list[int] = field(default_factory=list)
    # A streamed share keeps no episode: it counts them, and spilled their records here.
    tally: RunTally | None = None
    record_paths: list[str] = field(default_factory=list)

    def discard(self) -> None:
        """Remove the share's spilled records (a share whose run is not used)."""
        for path in self.record_paths:
            os.unlink(path)
        self.record_paths = []


def _merged(parts: list[tuple[list[Any], list[Any]]]) -> list[Any]:
    if len(parts) == 1:
        return parts[0][1]
    runs = [zip(tags, records, strict=True) for tags, records in parts]
    return [record for _, record in heapq.merge(*runs, key=lambda pair: pair[0])]


def merge_shares(shares: list[ShareResult]) -> ShareResult:
    """The shares' records as one process would have listed them."""
    tallies = [s.tally for s in shares if s.tally is not None]
    if tallies:
        assert len(tallies) == len(shares), "every share of a run streams, or none"
        return ShareResult(
            regressions=_merged([(s.regression_keys, s.regressions) for s in shares]),
            rejected=_merged([(s.rejected_at, s.rejected) for s in shares]),
            skipped=_merged([(s.skipped_at, s.skipped) for s in shares]),
            tally=RunTally.merged(tallies),
            record_paths=[path for s in shares for path in s.record_paths],
        )
    return ShareResult(
        episodes=_merged([(s.episode_keys, s.episodes) for s in shares]),
        episode_json=_merged([(s.episode_keys, s.episode_json) for s in shares]),
        regressions=_merged([(s.regression_keys, s.regressions) for s in shares]),
        rejected=_merged([(s.rejected_at, s.rejected) for s in shares]),
        skipped=_merged([(s.skipped_at, s.skipped) for s in shares]),
    )
