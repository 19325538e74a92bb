"""A run's decoded episodes put in start order in bounded memory (an external merge sort).

A scoring run scores episodes in start order, whatever order its input lists them in (a store
pages newest first). `EpisodeSorter` holds up to `run_size` decoded episodes; when that many
wait, it sorts them and writes them to a scratch file as one sorted run, and `in_order()`
merges the runs (and what still waits) back, reading each run front to back. Memory holds
one run's worth of episodes and one buffered episode per run, whatever the input's size.

An episode whose result was computed directly (`store_results`) travels as a tuple of plain
values written with `marshal` (a few microseconds each way, about a fifth of pickle's time
for these objects); one that carries signals (evaluated against suites) is pickled.
"""

from __future__ import annotations

import contextlib
import heapq
import marshal
import os
import pickle
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import IO, Any

from evalstream.assertions.evaluation.facts import EpisodeMetrics
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.codecs.store_results import StoreResult
from evalstream.stream.scored_records import ScratchError

JSON = Any
Place = tuple[float, str]  # start, episode id: the run's scoring order
_BUFFER = 1 << 20
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


def _plain(item: DecodedEpisode) -> tuple[Any, ...] | None:
    """`item` as plain values, or None when it is not the shape they describe exactly."""
    found = item.direct
    if found is None or item.signals is not None:
        return None
    result, m = found.result, found.result.metrics
    if result.assertions or result.attrs is not item.attrs:
        return None
    return (
        _DIRECT,
        item.position,
        item.where,
        item.start,
        item.running,
        found.tool_names,
        found.start,
        found.running,
        result.episode_id,
        result.case_id,
        result.close_reason,
        result.signals,
        result.duplicates,
        result.attrs,
        result.suites,
        result.started_ts,
        result.ended_ts,
        result.output,
        result.notes,
        result.error,
        m.latency_ms,
        m.input_tokens,
        m.output_tokens,
        m.total_tokens,
        m.cost_usd,
        m.unpriced_models,
        m.activations,
        m.tool_calls,
        m.llm_calls,
        m.errors,
        m.policy_violations,
    )


def _from_plain(values: tuple[Any, ...]) -> DecodedEpisode:
    (
        _,
        position,
        where,
        start,
        running,
        tool_names,
        found_start,
        found_running,
        episode_id,
        case_id,
        close_reason,
        signals,
        duplicates,
        attrs,
        suites,
        started_ts,
        ended_ts,
        output,
        notes,
        error,
        *metrics,
    ) = values
    result = EpisodeResult(
        episode_id,
        case_id,
        close_reason,
        signals,
        duplicates,
        [],
        EpisodeMetrics(*metrics),
        attrs,
        suites,
        started_ts,
        ended_ts,
        output,
        notes,
        error,
    )
    found = StoreResult(result, tool_names, found_start, found_running)
    return DecodedEpisode(where, episode_id, start, attrs, running, direct=found, position=position)


def write_episode(item: DecodedEpisode, out: IO[bytes]) -> None:
    plain = _plain(item)
    if plain is not None:
        try:
            out.write(marshal.dumps(plain))
            return
        except ValueError:  # a value marshal does not write (a mapping proxy, a subclass)
            pass
    marshal.dump((_PICKLED, pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)), out)


def read_episodes(path: str) -> Iterator[tuple[Place, DecodedEpisode]]:
    with open(path, "rb", buffering=_BUFFER) as run:
        while True:
            try:
                values = marshal.load(run)
            except EOFError:
                return
            item = _from_plain(values) if values[0] == _DIRECT else pickle.loads(values[1])
            yield item.place, item


class EpisodeSorter:
    """Decoded episodes in, the same in start order out (see the module docstring)."""

    def __init__(self, directory: str | None, run_size: int) -> None:
        self.directory = directory  # None: everything waits in memory
        self.run_size = run_size
        self.waiting: list[tuple[Place, DecodedEpisode]] = []
        self.runs: list[str] = []

    def add(self, item: DecodedEpisode) -> None:
        self.waiting.append((item.place, item))
        if self.directory is not None and len(self.waiting) >= self.run_size:
            self._spill()

    def _spill(self) -> None:
        directory = self.directory
        assert directory is not None
        self.waiting.sort(key=itemgetter(0))
        try:
            fd, path = tempfile.mkstemp(dir=directory, prefix="episodes-", suffix=".run")
            self.runs.append(path)
            with os.fdopen(fd, "wb", buffering=_BUFFER) as run:
                for _, item in self.waiting:
                    write_episode(item, run)
        except OSError as exc:
            raise ScratchError.of(directory, exc) from exc
        self.waiting = []

    def in_order(self) -> Iterator[DecodedEpisode]:
        """Every episode added, in start order (once; each run file is removed when read)."""
        self.waiting.sort(key=itemgetter(0))
        if not self.runs:
            waiting, self.waiting = self.waiting, []
            waiting.reverse()
            while waiting:
                yield waiting.pop()[1]  # each is freed once scored
            return
        sources = [read_episodes(path) for path in self.runs]
        waiting, self.waiting = self.waiting, []
        sources.append(iter(waiting))
        for _, item in heapq.merge(*sources, key=itemgetter(0)):
            yield item
        self.discard()

    def discard(self) -> None:
        for path in self.runs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self.runs = []
