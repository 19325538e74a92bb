"""Runs untrusted generated code inside a bubblewrap (`bwrap`) sandbox (a `CodeRunner`).

Per run, the code sees:

- a read-only view of only what the interpreter needs: `/usr`, the `/bin` `/lib*` `/sbin`
  links (or directories), the interpreter's prefix when it lies outside `/usr`
  (`sys.base_prefix`, e.g. a pyenv build) and `/etc/ld.so.cache`. Nothing else of the
  evaluator's file system: not the suite, the working tree, `/root`, `/home` or `/etc`;
- a private, size-bounded tmpfs as working directory (`/sandbox`, also `HOME`) holding
  the run's files read-only plus a writable `result.json` bound from the evaluator's
  scratch directory, and a private size-bounded tmpfs `/tmp`;
- new PID, network, IPC, UTS, user and cgroup namespaces (`--unshare-all --unshare-user`):
  no network at all (only its own loopback), no view of or signal to other processes;
- the interpreter in isolated mode without `site` (`-I -S -B`): the standard library only,
  no site-packages (which also halves the start-up);
- uid/gid 65534 with every capability dropped, a new session (no terminal injection), an
  empty environment but for `PATH`, `HOME`, `TMPDIR`, `LANG`;
- the limits of `SandboxLimits`: CPU seconds, address space, file size, no core dumps and
  a process count (a `pids` cgroup where one can be made, else `RLIMIT_NPROC`).

The wall-clock timeout kills `bwrap` (its process group); `--die-with-parent` then kills
the namespace's init, and with it the kernel kills every process of the PID namespace, so a
detached child (setsid + fork) holding the output pipes cannot outlive the run. Output is
read with a deadline either way.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from evalstream.assertions.graders.function_output import RESULT_FILE, SandboxLimits, SandboxRun
from evalstream.connectors.sandboxing.child_process import kill_group, read_result, set_limits
from evalstream.connectors.sandboxing.pids_cgroup import PidsCgroup, join

OUTPUT_LIMIT = 10_000
SANDBOX_UID = 65534
WORKDIR = "/sandbox"
ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
PIPE_GRACE_S = 2.0
# bwrap's own environment: its init (pid 1 in the sandbox) keeps it readable in
# /proc/1/environ, so the evaluator's environment must never reach it.
BWRAP_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"


class SandboxUnavailableError(OSError):
    """The sandbox cannot be set up here; graded code is refused rather than run unconfined."""


@dataclass(frozen=True)
class BwrapProbe:
    binary: str | None
    error: str | None


def base_interpreter() -> tuple[str, str]:
    """The real interpreter behind `sys.executable` (a venv's lives outside the sandbox view)
    and its prefix."""
    return os.path.realpath(sys.executable), os.path.realpath(sys.base_prefix)


def view_arguments(prefix: str) -> list[str]:
    """The read-only file system view: `/usr`, the root links, the interpreter prefix."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ROOT_LINKS:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    if prefix != "/usr" and not prefix.startswith("/usr/"):
        args += ["--ro-bind", prefix, prefix]
    args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return args


def namespace_arguments() -> list[str]:
    uid = str(SANDBOX_UID)
    return [
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--new-session",
        "--uid",
        uid,
        "--gid",
        uid,
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "HOME",
        WORKDIR,
        "--setenv",
        "TMPDIR",
        "/tmp",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]


@functools.lru_cache(maxsize=1)
def probe_bwrap() -> BwrapProbe:
    """Whether a full sandbox starts here: `bwrap` on PATH and user namespaces allowed
    (probed once per process)."""
    binary = shutil.which("bwrap")
    if binary is None:
        return BwrapProbe(None, f"bwrap (bubblewrap) is not on PATH; {INSTALL_HINT}")
    python, prefix = base_interpreter()
    tmpfs = ["--size", str(1 << 20), "--tmpfs", "/tmp"]
    command = [
        binary,
        *namespace_arguments(),
        *view_arguments(prefix),
        *tmpfs,
        python,
        "-I",
        "-c",
        "",
    ]
    try:
        probe = subprocess.run(
            command, env=BWRAP_ENV, capture_output=True, timeout=30, check=False, text=True
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return BwrapProbe(binary, f"bwrap could not start: {exc}")
    if probe.returncode != 0:
        reason = probe.stderr.strip()[-500:] or f"exit status {probe.returncode}"
        return BwrapProbe(
            binary,
            f"bwrap could not create the sandbox ({reason}); it needs user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0, or "
            "a container that allows them)",
        )
    return BwrapProbe(binary, None)


def _limit(limits: SandboxLimits, procs_file: str | None) -> None:
    """Runs in the child between fork and exec: async-signal-safe calls only."""
    if procs_file is not None:
        join(procs_file)
    set_limits(limits)
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))


class BwrapSandbox:
    """`CodeRunner` over bubblewrap; see the module docstring for what it isolates."""

    isolation = "bwrap"

    def __init__(self) -> None:
        probe = probe_bwrap()
        if probe.error is not None or probe.binary is None:
            raise SandboxUnavailableError(probe.error or "bwrap unavailable")
        self.binary = probe.binary
        self.python, self.prefix = base_interpreter()

    def command(
        self, scratch: Path, names: list[str], entry: str, limits: SandboxLimits
    ) -> list[str]:
        tmpfs_bytes = str(limits.file_size_mb * 4 * 1024 * 1024)
        args = [self.binary, *namespace_arguments(), *view_arguments(self.prefix)]
        args += ["--size", tmpfs_bytes, "--tmpfs", "/tmp", "--size", tmpfs_bytes]
        args += ["--tmpfs", WORKDIR]
        for name in names:
            args += ["--ro-bind", str(scratch / name), f"{WORKDIR}/{name}"]
        args += ["--bind", str(scratch / RESULT_FILE), f"{WORKDIR}/{RESULT_FILE}"]
        args += ["--chdir", WORKDIR, self.python, "-I", "-S", "-B", entry]
        return args

    def run_python(
        self, files: Mapping[str, str], entry: str, stdin: str, limits: SandboxLimits
    ) -> SandboxRun:
        with tempfile.TemporaryDirectory(prefix="evalstream-sandbox-") as scratch:
            root = Path(scratch)
            for name in files:
                if "/" in name or name in ("", ".", "..", RESULT_FILE):
                    raise OSError(f"sandbox file {name!r} must be a plain file name")
                (root / name).write_text(files[name], "utf-8")
            (root / RESULT_FILE).write_text("", "utf-8")
            cgroup = PidsCgroup.create(limits.max_processes)
            try:
                command = self.command(root, list(files), entry, limits)
                return _run(command, root, stdin, limits, cgroup)
            finally:
                if cgroup is not None:
                    cgroup.remove()


def _run(
    command: list[str], root: Path, stdin: str, limits: SandboxLimits, cgroup: PidsCgroup | None
) -> SandboxRun:
    process = subprocess.Popen(
        command,
        env=BWRAP_ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
        preexec_fn=functools.partial(  # noqa: PLW1509 - limits and the cgroup must apply in the child before exec; the parent holds no locks the child needs
            _limit, limits, cgroup.procs_file if cgroup else None
        ),
    )
    timed_out = False
    try:
        stdout, stderr = process.communicate(stdin, timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(process)
        stdout, stderr = _drain(process)
    result = read_result(root / RESULT_FILE)
    if not timed_out and result is None and stderr.startswith("bwrap:"):
        # bwrap itself failed to set the sandbox up: the runner's failure, not the code's
        raise OSError(f"bwrap could not start the sandbox: {stderr.strip()[-500:]}")
    if process.returncode is not None and process.returncode < 0:
        timed_out = timed_out or -process.returncode in (signal.SIGXCPU, signal.SIGKILL)
    if process.returncode in (128 + signal.SIGXCPU, 128 + signal.SIGKILL) and result is None:
        # bwrap reports its child's death by signal as 128 + the signal
        timed_out = True
    return SandboxRun(
        returncode=process.returncode,
        stdout=stdout[-OUTPUT_LIMIT:],
        stderr=stderr[-OUTPUT_LIMIT:],
        timed_out=timed_out,
        result=result,
    )


def _drain(process: subprocess.Popen[str]) -> tuple[str, str]:
    """What is left in the pipes, within a grace period: a holder of the write ends that
    escaped the kill must not hold the grader."""
    try:
        return process.communicate(timeout=PIPE_GRACE_S)
    except subprocess.TimeoutExpired:
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=PIPE_GRACE_S)
        return "", "output pipes still held after the kill; closed"
