"""Runs generated code in a plain subprocess with limits: the runner when the user opts out of
the bubblewrap sandbox (`evalstream.connectors.sandboxing.bwrap`), which its grades report as
`sandbox: off`.

Per run:

- a fresh scratch directory (the working directory, `HOME` and `TMPDIR`), deleted afterwards;
- a minimal environment and Python's isolated mode (`-I`: no user site, no PYTHON* variables);
- resource limits set in the child before exec (`resource.setrlimit`): CPU seconds
  (`RLIMIT_CPU`, the kernel kills a busy loop), address space (`RLIMIT_AS`, memory), file size
  (`RLIMIT_FSIZE`) and no core dumps;
- a wall-clock timeout; the child leads its own session and the whole process group is killed;
- no network: the child runs in a new, empty network namespace (`unshare --net`; as root, or
  `unshare --map-root-user --net` for an unprivileged user where user namespaces are enabled).
  Where neither works, `network_isolation` is `"none"` and the sandbox says so: the limits
  still apply, but the code can reach the network (best effort, documented in
  docs/graders.md). `require_network_isolation=True` refuses to run without it.

This guards against accidents and sloppy code only: the code runs as the evaluator's user
and sees its whole file system and its processes.
"""

from __future__ import annotations

import functools
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from evalstream.assertions.graders.function_output import RESULT_FILE, SandboxLimits, SandboxRun
from evalstream.connectors.sandboxing.child_process import kill_group, read_result, set_limits

OUTPUT_LIMIT = 10_000
NetworkIsolation = Literal["unshare", "unshare-user", "none"]


@functools.lru_cache(maxsize=1)
def detect_network_isolation() -> NetworkIsolation:
    """Which `unshare` form works here (probed once per process)."""
    binary = shutil.which("unshare")
    if binary is None:
        return "none"
    for mode, flags in (("unshare", ["--net"]), ("unshare-user", ["--map-root-user", "--net"])):
        try:
            probe = subprocess.run(
                [binary, *flags, "true"], capture_output=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return mode  # type: ignore[return-value]  # the literal from the tuple above
    return "none"


class SubprocessSandbox:
    """`CodeRunner` over `subprocess`; see the module docstring for what it enforces."""

    isolation = "off"

    def __init__(
        self,
        python: str = sys.executable,
        *,
        network: NetworkIsolation | Literal["auto"] = "auto",
        require_network_isolation: bool = False,
    ) -> None:
        self.python = python
        self.network_isolation: NetworkIsolation = (
            detect_network_isolation() if network == "auto" else network
        )
        if require_network_isolation and self.network_isolation == "none":
            raise OSError(
                "no network isolation available: `unshare --net` failed here; run as root, "
                "enable user namespaces, or pass require_network_isolation=False"
            )

    def command(self, entry: str) -> list[str]:
        base = [self.python, "-I", "-B", entry]
        if self.network_isolation == "unshare":
            return ["unshare", "--net", "--", *base]
        if self.network_isolation == "unshare-user":
            return ["unshare", "--map-root-user", "--net", "--", *base]
        return base

    def run_python(
        self, files: Mapping[str, str], entry: str, stdin: str, limits: SandboxLimits
    ) -> SandboxRun:
        with tempfile.TemporaryDirectory(prefix="evalstream-sandbox-") as scratch:
            root = Path(scratch)
            for name, text in files.items():
                target = (root / name).resolve()
                if root.resolve() not in target.parents:
                    raise OSError(f"sandbox file {name!r} would land outside the scratch dir")
                target.write_text(text, "utf-8")
            env = {
                "PATH": "/usr/bin:/bin",
                "HOME": scratch,
                "TMPDIR": scratch,
                "LANG": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
            process = subprocess.Popen(
                self.command(entry),
                cwd=scratch,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
                preexec_fn=functools.partial(set_limits, limits),  # noqa: PLW1509 - setrlimit must run in the child before exec; the parent holds no locks the child needs
            )
            timed_out = False
            try:
                stdout, stderr = process.communicate(stdin, timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(process)
                stdout, stderr = process.communicate()
            result = read_result(root / RESULT_FILE)
            if process.returncode is not None and process.returncode < 0:
                killed_by = -process.returncode
                timed_out = timed_out or killed_by in (signal.SIGXCPU, signal.SIGKILL)
            return SandboxRun(
                returncode=process.returncode,
                stdout=stdout[-OUTPUT_LIMIT:],
                stderr=stderr[-OUTPUT_LIMIT:],
                timed_out=timed_out,
                result=result,
            )
