"""One episode's evidence from files, for `evalstream episode ID FILE...`.

A file may be:
- a `check --format json` results document (one JSON object with an `episodes` list);
- JSONL of output records: episode records, verdict records, alerts (what the worker
  publishes, e.g. consumed with kcat);
- JSONL of signals (what `check` reads);
- a topic recording (`evalstream record`, evalstream/connectors/files/recording.py, `.zst` too) of
  any of the topics above: each message's value is classified the same way, its key is the episode
  id.

Records are told apart by their fields, so a file may mix them. Lines that are not JSON
objects are not evidence: they are skipped here (`file_signals` reports them as `Rejected`,
as `check` does).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from evalstream.assertions.errors import InputError, SignalDecodeError
from evalstream.assertions.reports.episode_timeline import EpisodeEvidence
from evalstream.assertions.wire.signals import Signal, signal_from_obj
from evalstream.connectors.codecs.jsonl import Rejected
from evalstream.connectors.files.recording import (
    HEADER_KEY,
    RecordingReader,
    decode_message,
    is_compressed,
)

JSON = Any
RECORDING_FIELDS = frozenset({"topic", "partition", "offset"})
OTHER_IDS_SHOWN = 5
# The worker's close decisions travel in the signals topic under this reserved name: they
# are not the agent's signals (evalstream/stream/kafka_worker/partition_feed.py).
CONTROL_SIGNAL = "evalstream:close"


def kind_of(obj: dict[str, JSON]) -> str:
    """`episode`, `verdict`, `alert` or `signal`: which record an object is, by its fields."""
    if "close_reason" in obj and "assertions" in obj:
        return "episode"
    if "verdict" in obj and "rule" in obj:
        return "verdict"
    if "dimension" in obj and "severity" in obj:
        return "alert"
    return "signal"


def _objects(path: Path) -> Iterator[tuple[str, int, JSON, str | None]]:
    """(where, line, object, message key) of each JSON value in the file, recordings unpacked."""
    if is_compressed(path):
        with RecordingReader(path) as reader:
            for n, msg in enumerate(reader, start=1):
                yield from _message_value(f"{path}#{n}", n, msg.key, msg.value)
        return
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    first = data.lstrip()[:1]
    if first == b"{" and not _first_line_is_json(data):
        try:  # one indented JSON document: a `check --format json` report
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise InputError(
                f"{path}: neither JSONL nor one JSON document ({exc}); pass a results file "
                "of `check --format json`, a JSONL file of records or signals, or a recording"
            ) from exc
        episodes = doc.get("episodes") if isinstance(doc, dict) else None
        for i, episode in enumerate(episodes if isinstance(episodes, list) else [doc]):
            yield f"{path}[{i}]", i, episode, None
        return
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            yield f"{path}:{number}", number, raw, None
            continue
        if isinstance(obj, dict) and HEADER_KEY in obj:
            continue
        if isinstance(obj, dict) and obj.keys() >= RECORDING_FIELDS:
            try:
                msg = decode_message(obj)
            except ValueError as exc:
                raise InputError(f"{path}:{number}: {exc}") from exc
            yield from _message_value(f"{path}:{number}", number, msg.key, msg.value)
            continue
        yield f"{path}:{number}", number, obj, None


def _first_line_is_json(data: bytes) -> bool:
    try:
        orjson.loads(data.lstrip().split(b"\n", 1)[0])
    except orjson.JSONDecodeError:
        return False
    return True


def _message_value(
    where: str, line: int, key: bytes | None, value: bytes | None
) -> Iterator[tuple[str, int, JSON, str | None]]:
    if value is None:  # a tombstone
        return
    episode_id = key.decode("utf-8", "replace") if key else None
    try:
        yield where, line, orjson.loads(value), episode_id
    except orjson.JSONDecodeError:
        yield where, line, value, episode_id


def read_file_evidence(paths: Sequence[str | Path], episode_id: str) -> EpisodeEvidence:
    """The records and signals of `episode_id` in the files; `signals` is None when the
    files hold no signal at all (a results file)."""
    where = ", ".join(str(p) for p in paths)
    evidence = EpisodeEvidence(episode_id, where)
    signals: list[Signal] = []
    any_signal = False
    for path in paths:
        for _, _, obj, key in _objects(Path(path)):
            if not isinstance(obj, dict):
                continue
            kind = kind_of(obj)
            found = obj.get("episode_id") or key
            if found != episode_id:
                note_other_id(evidence, found)
            if kind == "signal":
                any_signal = True
                if found != episode_id or obj.get("name") == CONTROL_SIGNAL:
                    continue
                try:
                    signals.append(signal_from_obj(obj, episode_id=key))
                except SignalDecodeError:
                    continue  # not a valid signal: the evaluation reports it
            elif obj.get("episode_id") == episode_id:
                getattr(evidence, f"{kind}s").append(obj)
    evidence.signals = signals if any_signal else None
    return evidence


def note_other_id(evidence: EpisodeEvidence, episode_id: JSON) -> None:
    """Remember a few ids that were not the one looked for: an error message shows them."""
    if (
        isinstance(episode_id, str)
        and len(evidence.other_ids) < OTHER_IDS_SHOWN
        and episode_id not in evidence.other_ids
    ):
        evidence.other_ids.append(episode_id)


def file_signals(paths: Sequence[str | Path]) -> Iterator[Signal | Rejected]:
    """Every signal of the files in file order (all episodes: evaluation closes episodes on
    event time, as `check` does), with rejects for lines that are not valid signals."""
    for path in paths:
        for where, line, obj, key in _objects(Path(path)):
            if isinstance(obj, dict) and (
                kind_of(obj) != "signal" or obj.get("name") == CONTROL_SIGNAL
            ):
                continue
            raw = obj if isinstance(obj, bytes) else orjson.dumps(obj)
            try:
                if not isinstance(obj, dict):
                    raise SignalDecodeError("invalid_json", f"{where}: not a JSON object")
                yield signal_from_obj(obj, episode_id=key)
            except SignalDecodeError as exc:
                yield Rejected(str(path), line, exc.reason, exc.message, raw[:1024])
