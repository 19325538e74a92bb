"""The garbage collector during a one-shot batch command (`score`, `nightly`).

Why: such a command decodes a whole export into long-lived objects (episodes, signals,
results) that live until it exits and hold almost no reference cycles. CPython's full
collections walk all of them again and again: at 20,000 store episodes, 14 full collections
took ~30 % of the CPU and freed nothing. Young collections (where the few cycles die) run as
usual; full ones wait until the batch is over.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# A full collection only after this many middle-generation collections: in practice never,
# unless someone runs one (the worker's timer) or the thresholds come back.
_RARELY = 1_000_000


def defer_full_collections() -> tuple[int, int, int]:
    """From now on no full collection runs by itself (young ones still do); returns the
    thresholds it replaced. The batch commands defer them for a block, the Kafka worker for
    good (it runs them from a timer)."""
    previous = gc.get_threshold()
    young, middle, _ = previous
    gc.set_threshold(young, middle, _RARELY)
    return previous


@contextmanager
def full_collections_deferred() -> Iterator[None]:
    """Within the block no full collection runs; the previous thresholds come back after."""
    previous = defer_full_collections()
    try:
        yield
    finally:
        gc.set_threshold(*previous)
