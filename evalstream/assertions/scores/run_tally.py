"""A scoring run's summary counted as episodes are scored, without keeping the episodes.

`RunTally.add` takes each scored episode once, in scoring order; `summary()` is then what
`summarise` computes from the list of every episode, exactly: the means are the correctly
rounded sums of the same values (`math.fsum`), kept here as the exact partial sums of
Shewchuk's algorithm, which `math.fsum` rounds once at the end. Tallies of a run split across
processes merge (`merged`) into the one tally of the whole run: each alert dimension
remembers the place of its first episode, so the summary lists dimensions in the order the
whole run met them. A tally can also pick the episodes a report of the run lists
(`worst_episodes`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalstream.assertions.alerting.alert_rules import Severity
from evalstream.assertions.alerting.regression import AlertEvent
from evalstream.assertions.scores.run import (
    SCORE_NAMES,
    Place,
    Rejected,
    ScoredEpisode,
    summarise,
)
from evalstream.assertions.scores.worst_episodes import WorstEpisodes

JSON = Any


def _add_exact(partials: list[float], value: float) -> None:
    """Add `value` to the non-overlapping partial sums `partials`, losing nothing."""
    x = value
    kept = 0
    for partial in partials:
        y = partial
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[kept] = lo
            kept += 1
        x = hi
    partials[kept:] = [x]


@dataclass
class ExactSum:
    """A sum of floats kept exactly, and the count of its terms."""

    partials: list[float] = field(default_factory=list)
    special: list[float] = field(default_factory=list)  # inf and nan, which fsum handles itself
    count: int = 0

    def add(self, value: float) -> None:
        self.count += 1
        if math.isfinite(value):
            _add_exact(self.partials, value)
        else:
            self.special.append(value)

    def mean(self) -> float | None:
        if not self.count:
            return None
        return math.fsum([*self.partials, *self.special]) / self.count


@dataclass
class RunTally:
    """Counts, exact score sums and alert counts of the episodes scored so far."""

    episodes: int = 0
    passed: int = 0
    critical_episodes: int = 0
    warning_episodes: int = 0
    without_baseline: int = 0
    sums: dict[str, ExactSum] = field(default_factory=lambda: {n: ExactSum() for n in SCORE_NAMES})
    # severity -> dimension -> [count, place of the first episode with it]
    alerts: dict[str, dict[str, tuple[int, Place]]] = field(
        default_factory=lambda: {s.value: {} for s in Severity}
    )
    evaluated: int = 0  # episodes a suite's assertion applied to
    # The run's first episode's place and attributes (a message names them).
    first: tuple[Place, Mapping[str, JSON]] | None = None
    # The episodes a report of the run lists (None: no report wanted).
    listed: WorstEpisodes | None = None

    def add(self, episode: ScoredEpisode, place: Place) -> None:
        self.episodes += 1
        if self.first is None:  # episodes come in scoring order
            self.first = (place, episode.inp.attrs)
        if episode.assertions:
            self.evaluated += 1
        if self.listed is not None:
            self.listed.offer(episode, place)
        if episode.passed:
            self.passed += 1
        scores = episode.scores
        if scores.baseline is None:
            self.without_baseline += 1
        for name, total in self.sums.items():
            value = scores.dimension(name)
            if value is not None:
                total.add(value)
        alerts = episode.alerts
        if not alerts:
            return
        critical = False
        for alert in alerts:
            by_dim = self.alerts[alert.severity.value]
            seen = by_dim.get(alert.dimension)
            by_dim[alert.dimension] = (seen[0] + 1, seen[1]) if seen else (1, place)
            critical = critical or alert.severity is Severity.CRITICAL
        if critical:
            self.critical_episodes += 1
        else:
            self.warning_episodes += 1

    @property
    def failed(self) -> int:
        return self.episodes - self.passed

    @classmethod
    def merged(cls, tallies: Sequence[RunTally]) -> RunTally:
        """One tally of the episodes of all `tallies` (disjoint parts of one run)."""
        whole = cls()
        for part in tallies:
            whole.episodes += part.episodes
            whole.passed += part.passed
            whole.critical_episodes += part.critical_episodes
            whole.warning_episodes += part.warning_episodes
            whole.without_baseline += part.without_baseline
            whole.evaluated += part.evaluated
            if part.first is not None and (whole.first is None or part.first[0] < whole.first[0]):
                whole.first = part.first
            for name, total in whole.sums.items():
                other = part.sums[name]
                for value in other.partials:
                    _add_exact(total.partials, value)
                total.special.extend(other.special)
                total.count += other.count
            for severity, by_dim in part.alerts.items():
                into = whole.alerts[severity]
                for dim, (count, first) in by_dim.items():
                    seen = into.get(dim)
                    into[dim] = (seen[0] + count, min(seen[1], first)) if seen else (count, first)
        picks = [part.listed for part in tallies if part.listed is not None]
        if picks:
            whole.listed = WorstEpisodes.merged(picks)
        return whole

    @property
    def first_attrs(self) -> Mapping[str, JSON] | None:
        return self.first[1] if self.first is not None else None

    def listed_records(self) -> list[dict[str, JSON]] | None:
        """The records a report of the run lists, in its order (None: none were picked)."""
        return self.listed.records() if self.listed is not None else None

    def summary(
        self,
        regressions: Sequence[AlertEvent],
        rejected: Sequence[Rejected],
        skipped: Sequence[Mapping[str, str]],
    ) -> dict[str, JSON]:
        """`summarise` of the episodes added, with the run's other records."""
        counted = summarise([], regressions, rejected, skipped)
        alerts: dict[str, dict[str, int]] = {}
        for severity, by_dim in self.alerts.items():
            in_order = sorted(by_dim.items(), key=lambda item: item[1][1])
            alerts[severity] = {dim: count for dim, (count, _) in in_order}
        counted.update(
            episodes=self.episodes,
            passed=self.passed,
            failed=self.failed,
            critical_episodes=self.critical_episodes,
            warning_episodes=self.warning_episodes,
            without_baseline=self.without_baseline,
            mean_scores={name: total.mean() for name, total in self.sums.items()},
            alerts=alerts,
        )
        return counted
