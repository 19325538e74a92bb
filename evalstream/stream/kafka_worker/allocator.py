"""glibc malloc settings for a process that reads large Kafka fetch responses.

Why: a fetch response of several MiB is read into one buffer. glibc serves an allocation that
large with a fresh `mmap` (or grows the heap and trims it again once the buffer is freed), so
every fetch faulted in new pages that the kernel zeroed first: 8 % of a busy worker's samples
were `clear_page_erms` under the copy into that buffer (perf). With large buffers taken from
the heap, and the heap's top kept, freed buffers are reused as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("evalstream.worker")

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's largest mmap threshold on 64-bit (HEAP_MAX_SIZE / 2): buffers up to this size
# come from the heap; fetches are 8 MiB a partition
# (evalstream.stream.kafka_worker.signals_consumer).
MMAP_THRESHOLD = 32 * 1_048_576
# How much free memory at the heap's top is kept for reuse rather than returned.
TRIM_THRESHOLD = 128 * 1_048_576


def keep_large_buffers() -> bool:
    """Applies the settings; False where the C library is not glibc (nothing changes)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc: musl has no mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if not applied:
        log.warning("malloc settings were refused; large fetch buffers are mapped afresh")
    return applied
