"""The episodes a scoring run's report lists, picked while the run is scored.

A Markdown report of a run lists at most `LISTED_EPISODES` episodes: the failing ones first,
then by overall score, lowest first (unscored last), ties in the run's order. A run that
keeps every episode sorts them all at the end; a streamed run offers each episode to a
`WorstEpisodes` as it is scored, which keeps only the records that can still be listed, so
the report costs memory for those few whatever the run's size. Picks of a run split across
processes merge (`merged`) into the run's own: each pick is ranked by its listing key, then
its place in the run's order, the same rank a sort of the whole run gives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalstream.assertions.scores.run import Place, ScoredEpisode

JSON = Any
LISTED_EPISODES = 500  # a nightly run of thousands of episodes lists its worst 500
ListingKey = tuple[int, float]
Rank = tuple[ListingKey, Place]


def listing_key(passed: JSON, overall: JSON) -> ListingKey:
    """Failing first, then by overall score (lowest first, unscored after every score)."""
    return (1 if passed else 0, 2.0 if overall is None else float(overall))


@dataclass
class WorstEpisodes:
    """The records of the first `limit` episodes offered, in listing order (see above)."""

    limit: int = LISTED_EPISODES
    picked: list[tuple[Rank, dict[str, JSON]]] = field(default_factory=list)
    # The rank of the last of `limit` picks: an episode ranked after it is never listed.
    cutoff: Rank | None = None

    def offer(self, episode: ScoredEpisode, place: Place) -> None:
        rank = (listing_key(episode.passed, episode.scores.overall), place)
        if self.cutoff is not None and rank >= self.cutoff:
            return
        self.picked.append((rank, episode.to_json()))
        if len(self.picked) >= 2 * self.limit:  # sorted once per `limit` picks
            self._trim()

    def _trim(self) -> None:
        self.picked.sort(key=lambda pick: pick[0])
        del self.picked[self.limit :]
        if len(self.picked) == self.limit:
            self.cutoff = self.picked[-1][0]

    def records(self) -> list[dict[str, JSON]]:
        """The listed episodes' records, in listing order."""
        self._trim()
        return [record for _, record in self.picked]

    @classmethod
    def merged(cls, parts: Sequence[WorstEpisodes]) -> WorstEpisodes:
        """The picks of a run whose disjoint parts `parts` picked."""
        whole = cls(limit=min((p.limit for p in parts), default=LISTED_EPISODES))
        for part in parts:
            whole.picked.extend(part.picked)
        whole._trim()
        return whole
