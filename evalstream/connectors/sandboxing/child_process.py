"""What both code runners do to their child process: its resource limits, killing its whole
process group, and reading the result file it leaves behind."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
from pathlib import Path

from evalstream.assertions.graders.function_output import SandboxLimits


def set_limits(limits: SandboxLimits) -> None:
    """CPU seconds, address space, file size and no core dumps; runs in the child between fork
    and exec: async-signal-safe calls only."""
    cpu = max(1, int(limits.cpu_seconds + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = limits.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    size = limits.file_size_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def read_result(path: Path) -> object:
    """The child's JSON result, or None when it left none (or one that does not parse)."""
    try:
        text = path.read_text("utf-8")
        return json.loads(text) if text else None
    except (OSError, ValueError):
        return None
