"""The garbage collector's schedule in a long-lived streaming process.

Why: open episodes live a few seconds, long enough for their objects to reach the oldest
generation, so CPython ran a full collection every 1.5-3 s in a busy worker. Each one walks
every object of every open episode and holds the event loop for 15-70 ms (measured with a
`gc.callbacks` probe), while evaluation creates almost no reference cycles: nearly all of
those collections freed nothing, but every signal behind one waited for it.

The policy: everything made at start-up is frozen (never walked again); young collections
run as usual (most cyclic garbage dies young); full collections run on a timer instead of
after every few young ones, so their pauses are rare and their rhythm known.
"""

from __future__ import annotations

import gc
import logging
import time

from evalstream.stream.batch_gc import defer_full_collections

log = logging.getLogger("evalstream.worker")


def freeze_startup_objects() -> None:
    """Collects, then moves every object alive now out of the collector's sight."""
    gc.collect()
    gc.freeze()


def schedule_full_collections(interval_s: float) -> None:
    """Full collections from a timer every `interval_s` (0: CPython's own schedule)."""
    if interval_s <= 0:
        return
    defer_full_collections()


def full_collection() -> int:
    """One full collection (the timer's); returns the number of objects it freed."""
    started = time.perf_counter()
    freed = gc.collect()
    log.debug(
        "full collection: %s objects freed in %.1f ms", freed, 1e3 * (time.perf_counter() - started)
    )
    return freed
