"""Large buffers are reused, not faulted in afresh, once the worker's malloc settings apply."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Minor page faults while a process makes and drops 20 buffers of 8 MiB, one at a time (a
# fetch response each); run in a fresh interpreter so this test process keeps its settings.
PROBE = """
import resource, sys
from evalstream.stream.kafka_worker.allocator import keep_large_buffers
if sys.argv[1] == "tuned":
    assert keep_large_buffers()
buffer = b"x" * (8 << 20)
del buffer
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    buffer = b"x" * (8 << 20)
    del buffer
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_fetch_sized_buffers_reuse_their_pages() -> None:
    plain, tuned = page_faults("plain"), page_faults("tuned")
    assert plain >= 20  # every buffer faulted in anew (fewer faults than pages: huge pages)
    assert tuned * 10 < plain
