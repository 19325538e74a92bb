"""The results file of a scoring run, written from episode records rendered as they were scored.

`score_run_json(run)` is `orjson.dumps(run.to_json(), option=OPT_INDENT_2)` byte for byte,
but each episode's record is rendered on its own (`episode_json`) — by the process that
scored it, when a run is split across processes — and spliced into the document, instead of
the whole run's records being built as one tree of dicts at the end.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from evalstream.assertions.scores.run import ScoredEpisode, ScoreRun, ScoreRunError

JSON = Any
_INDENT = b"    "  # an episode's record sits two levels deep: run -> episodes -> record
_EMPTY_EPISODES = b'\n  "episodes": [],\n'


def episode_json(episode: ScoredEpisode) -> bytes:
    """One episode's record as the results file holds it, indented for its place."""
    text = orjson.dumps(episode.to_json(), option=orjson.OPT_INDENT_2)
    return _INDENT + text.replace(b"\n", b"\n" + _INDENT)


def score_run_json(run: ScoreRun, summary: Mapping[str, JSON] | None = None) -> bytes:
    """The run's results file (without the final newline); `summary` when the caller has
    it already. Uses `run.rendered_episodes` when present."""
    return b"".join(score_run_json_parts(run, summary))


def score_run_json_parts(
    run: ScoreRun, summary: Mapping[str, JSON] | None = None
) -> Iterator[bytes]:
    """`score_run_json` in pieces, to write without joining them (a million episodes'
    records are over a gigabyte). A streamed run's records are read as they are written."""
    records: Iterable[bytes] | None = run.rendered_episodes
    if run.tally is not None:
        if records is None and run.tally.episodes:
            raise ScoreRunError("the run's episodes were streamed out without their records")
    elif not isinstance(records, Sequence) or len(records) != len(run.episodes):
        records = [episode_json(e) for e in run.episodes]
    frame = orjson.dumps(run.to_json(summary, episodes=False), option=orjson.OPT_INDENT_2)
    if records is None or not run.episode_count:
        yield frame
        return
    at = frame.index(_EMPTY_EPISODES)  # the top-level key; nested ones are indented deeper
    yield frame[:at]
    yield b'\n  "episodes": [\n'
    for i, record in enumerate(records):
        yield b",\n" + record if i else record
    yield b"\n  ],\n"
    yield frame[at + len(_EMPTY_EPISODES) :]


def write_score_run_json(
    path: str | Path, run: ScoreRun, summary: Mapping[str, JSON] | None = None
) -> None:
    """Write the results file, with its final newline."""
    with open(path, "wb") as out:
        out.writelines(score_run_json_parts(run, summary))
        out.write(b"\n")
