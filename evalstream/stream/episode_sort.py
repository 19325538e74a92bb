"""A run's decoded episodes put in start order in bounded memory (`spilled_sort`).

A scoring run scores episodes in start order, whatever order its input lists them in (a store
pages newest first). `EpisodeSorter` sorts them in runs of `run_size` written to scratch
files and merges the runs back (`in_order()`), holding one run's worth of episodes.

An episode whose result was computed directly (`store_results`) travels as a tuple of plain
values written with `marshal` (a few microseconds each way, about a fifth of pickle's time
for these objects); one that carries signals (evaluated against suites) is pickled.
"""

from __future__ import annotations

import marshal
import pickle
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import IO, Any

from evalstream.assertions.evaluation.facts import EpisodeMetrics
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.scores.run import Place
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.codecs.store_results import StoreResult
from evalstream.stream.spilled_sort import SpilledSort, marshal_frames

JSON = Any
_DIRECT, _PICKLED = 0, 1


@dataclass(frozen=True, slots=True)
class DecodedEpisode:
    """One valid episode, ready to score: its signals (evaluated against the suites), or,
    with no suite, its result computed directly from the episode (`store_results`)."""

    where: str
    episode_id: str
    start: float  # its first signal's time: episodes are scored in start order
    attrs: Mapping[str, JSON]
    running: bool
    signals: list[Signal] | None = None
    direct: StoreResult | None = None
    position: int = 0  # of the item in the run's input (which copy of a repeated id came first)

    @property
    def place(self) -> Place:
        return (self.start, self.episode_id)


# Every field, in constructor order: `EpisodeResult(*values)` rebuilds what was read.
_RESULT_FIELDS = tuple(f.name for f in fields(EpisodeResult))
_METRICS_AT = _RESULT_FIELDS.index("metrics")
_result_values = attrgetter(*_RESULT_FIELDS)
_metrics_values = attrgetter(*(f.name for f in fields(EpisodeMetrics)))


def _plain(item: DecodedEpisode) -> tuple[Any, ...] | None:
    """`item` as plain values, or None when it is not the shape they describe exactly (its
    id and attributes are its result's, which has no assertion outcome)."""
    found = item.direct
    if found is None or item.signals is not None:
        return None
    result = found.result
    if result.assertions or result.attrs is not item.attrs or result.episode_id != item.episode_id:
        return None
    values = list(_result_values(result))
    values[_METRICS_AT] = _metrics_values(result.metrics)
    return (
        _DIRECT,
        item.position,
        item.where,
        item.start,
        item.running,
        found.tool_names,
        found.start,
        found.running,
        values,
    )


def _from_plain(values: tuple[Any, ...]) -> DecodedEpisode:
    _, position, where, start, running, tool_names, found_start, found_running, result = values
    result[_METRICS_AT] = EpisodeMetrics(*result[_METRICS_AT])
    found = StoreResult(EpisodeResult(*result), tool_names, found_start, found_running)
    episode = found.result
    return DecodedEpisode(
        where, episode.episode_id, start, episode.attrs, running, direct=found, position=position
    )


def write_episode(item: DecodedEpisode, out: IO[bytes]) -> None:
    plain = _plain(item)
    if plain is not None:
        try:
            out.write(marshal.dumps(plain))
            return
        except ValueError:  # a value marshal does not write (a mapping proxy, a subclass)
            pass
    marshal.dump((_PICKLED, pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)), out)


def read_episodes(path: str) -> Iterator[DecodedEpisode]:
    for values in marshal_frames(path):
        yield _from_plain(values) if values[0] == _DIRECT else pickle.loads(values[1])


def place_of(item: DecodedEpisode) -> Place:
    return item.place


class EpisodeSorter(SpilledSort[DecodedEpisode]):
    """Decoded episodes in, the same in start order out (see the module docstring)."""

    def __init__(self, directory: str | None, run_size: int) -> None:
        super().__init__(
            directory,
            run_size,
            key=place_of,
            write=write_episode,
            read=read_episodes,
            prefix="episodes-",
        )
