"""A process-count bound for one sandboxed run: a `pids` cgroup of its own.

`RLIMIT_NPROC` does not bind a root evaluator (the kernel exempts uid 0, and the sandbox's
uid 65534 maps back to the evaluator's uid), so where the `pids` controller can be written
(cgroup v1 `/sys/fs/cgroup/pids`, or a delegated cgroup v2 subtree) each run gets a child
cgroup with `pids.max`, joined by the runner's child before it executes `bwrap`. Where no
such cgroup can be made, `PidsCgroup.create` returns None and `RLIMIT_NPROC` is the bound.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/pids")
V2_ROOT = Path("/sys/fs/cgroup")
REMOVE_WAIT_S = 2.0


@functools.lru_cache(maxsize=1)
def pids_parent() -> Path | None:
    """A cgroup directory under which this process may create `pids` cgroups (probed once)."""
    for parent in _candidates():
        probe = parent / f"evalstream-probe-{secrets.token_hex(4)}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if (probe / "pids.max").exists():
                return parent
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return None


def _candidates() -> list[Path]:
    found: list[Path] = []
    if (V1_ROOT / "cgroup.procs").exists():
        found.append(V1_ROOT)
    if (V2_ROOT / "cgroup.controllers").exists():
        with contextlib.suppress(OSError):
            own = Path("/proc/self/cgroup").read_text().strip().splitlines()
            v2 = [line.split(":", 2)[2] for line in own if line.startswith("0::")]
            if v2:
                found.append(V2_ROOT / v2[0].lstrip("/"))
    return found


@dataclass(frozen=True)
class PidsCgroup:
    path: Path

    @classmethod
    def create(cls, max_processes: int) -> PidsCgroup | None:
        parent = pids_parent()
        if parent is None:
            return None
        path = parent / f"evalstream-sandbox-{os.getpid()}-{secrets.token_hex(6)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_processes))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    @property
    def procs_file(self) -> str:
        return str(self.path / "cgroup.procs")

    def remove(self) -> None:
        """Called once the run is over. The kernel tears a dead PID namespace down
        asynchronously, so members may linger a moment: they are killed, and the removal
        retried for up to `REMOVE_WAIT_S`."""
        deadline = time.monotonic() + REMOVE_WAIT_S
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
            self._kill_members()
            time.sleep(0.01)

    def _kill_members(self) -> None:
        with contextlib.suppress(OSError):
            for line in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(line), signal.SIGKILL)


def join(procs_file: str) -> None:
    """Runs in the child between fork and exec: moves it into the cgroup."""
    fd = os.open(procs_file, os.O_WRONLY)
    try:
        os.write(fd, b"0")
    finally:
        os.close(fd)
