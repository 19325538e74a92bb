"""`--out FILE` of the embedded runtime: its episode and verdict records as JSON lines.

Each line is one record exactly as the Kafka worker publishes it to the episodes or verdicts
topic, with one field added in front: `"stream": "episodes"` or `"stream": "verdicts"` (the
topic it would go to; no record of either kind has a field of that name). The Kafka message
key is the record's `episode_id`. Lines are written and flushed as the records are emitted,
so a follower (`tail -f`, a log collector, `jq` on a pipe) sees them live.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, Any

import orjson

from evalstream.assertions.errors import InputError
from evalstream.stream.pipeline import EPISODES, VERDICTS, Sink

JSON = Any
STREAM_FIELD = "stream"
WRITTEN_STREAMS = frozenset({EPISODES, VERDICTS})
STDOUT = "-"


def record_line(stream: str, record: dict[str, JSON]) -> bytes:
    """One JSON line: the record with `stream` in front."""
    return orjson.dumps({STREAM_FIELD: stream, **record}) + b"\n"


class JsonlRecords:
    """A sink that writes episode and verdict records as JSON lines, then hands every record
    (dead letters and alerts too) to `inner`, which prints them."""

    def __init__(
        self, inner: Sink, handle: IO[bytes], *, owns_handle: bool, path: str = STDOUT
    ) -> None:
        self.inner = inner
        self.handle = handle
        self.owns_handle = owns_handle
        self.path = path
        self.to_stdout = not owns_handle
        self.reader_gone = False  # the pipe's reader exited (`| head`): records are dropped
        # A failed write (a full disk): the run goes on, close() reports it and the loss.
        self.write_error: OSError | None = None
        self.unwritten = 0

    @classmethod
    def open(cls, path: str, inner: Sink) -> JsonlRecords:
        """Records into `path` (truncated), or standard output for `-`."""
        if path == STDOUT:
            return cls(inner, sys.stdout.buffer, owns_handle=False)
        try:
            handle = Path(path).open("wb")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise InputError(
                f"cannot write the records to {path}: {exc.strerror or exc}; "
                "pass a writable file or `-` for standard output"
            ) from exc
        return cls(inner, handle, owns_handle=True, path=path)

    async def publish(self, stream: str, key: str, record: dict[str, JSON]) -> None:
        if stream in WRITTEN_STREAMS and not self.reader_gone:
            if self.write_error is not None:
                self.unwritten += 1
            else:
                try:
                    self.handle.write(record_line(stream, record))
                    self.handle.flush()
                except BrokenPipeError:
                    self._drop_the_rest()
                except OSError as exc:
                    self.write_error = exc
                    self.unwritten += 1
        await self.inner.publish(stream, key, record)

    def _drop_the_rest(self) -> None:
        """Nobody reads the records any more; the run goes on (its console output goes to
        stderr). The closed pipe is replaced by /dev/null so that no later flush, the
        interpreter's at exit included, fails on it."""
        self.reader_gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.handle.fileno())
        os.close(devnull)

    def close(self) -> None:
        """Closes the file; raises InputError when a write failed (naming the records lost)."""
        try:
            if self.owns_handle:
                self.handle.close()
            elif not self.reader_gone:
                self.handle.flush()
        except BrokenPipeError:
            self._drop_the_rest()
        except OSError as exc:
            self.write_error = self.write_error or exc
        failure = self.write_error
        if failure is not None:
            raise InputError(
                f"cannot write the records to {self.path}: {failure.strerror or failure}; "
                f"{self.unwritten} records were not written (the results above are complete)"
            ) from failure
