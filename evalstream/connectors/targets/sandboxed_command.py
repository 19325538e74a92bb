"""The bubblewrap sandbox around a `cmd:` target (`evalstream eval DATASET --sandbox`).

The command runs with the graders' sandbox settings (`evalstream.connectors.sandboxing.bwrap`): new
PID, network, IPC, UTS, user and cgroup namespaces (so no network: for agents that run offline or
against a recorded model), uid 65534 without capabilities, a new session, and a read-only
view of `/usr`, the root links and the evaluator's interpreter prefix. On top, read-only, it
sees what the command needs to start: its working directory, every argument that names an
existing path (the agent's script: the file itself, not its neighbours), and the virtual
environment or prefix of its executable. Its working directory is visible whole, so run it
from a directory holding the agent, not the datasets or secrets. `/tmp` and `HOME` are a
private tmpfs; the environment holds only `PATH`, `HOME`, `TMPDIR`, `LANG`, the target's own
variables and `EVALSTREAM_CASE_ID` / `EVALSTREAM_EPISODE_ID`. Everything else of the
evaluator (its other files, processes, environment, network) is out of reach.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from evalstream.assertions.errors import InputError
from evalstream.connectors.sandboxing.bwrap import (
    base_interpreter,
    namespace_arguments,
    probe_bwrap,
    view_arguments,
)

TMPFS_BYTES = 256 * 1024 * 1024


def _visible_paths(argv: list[str], cwd: str) -> list[str]:
    """What the command needs to start: its working directory, each argument naming an
    existing path (the file or directory itself, not its neighbours), and its executable's
    virtual environment or prefix (the parent of `bin/`, whose `lib/` holds the packages)."""
    paths = [os.path.realpath(cwd)]
    executable = Path(shutil.which(argv[0]) or argv[0])
    for resolved in {executable.absolute(), executable.resolve()}:
        if resolved.exists():
            folder = resolved.parent
            paths.append(str(folder.parent if folder.name == "bin" else folder))
    for argument in argv[1:]:
        path = Path(cwd, argument)
        if path.exists():
            paths += [str(path.absolute()), str(path.resolve())]
    return sorted(set(paths))


def sandboxed_argv(argv: list[str], cwd: str, env: dict[str, str]) -> list[str]:
    """`bwrap … argv`, or InputError naming the fix where the sandbox cannot start."""
    probe = probe_bwrap()
    if probe.error is not None or probe.binary is None:
        raise InputError(f"--sandbox: {probe.error}")
    _, prefix = base_interpreter()
    args = [probe.binary, *namespace_arguments(), *view_arguments(prefix)]
    # /tmp first: the binds below may lie under it and must stay visible on top of it
    args += ["--size", str(TMPFS_BYTES), "--tmpfs", "/tmp", "--setenv", "HOME", "/tmp"]
    for path in _visible_paths(argv, cwd):
        if path != "/" and not path.startswith("/usr/"):
            args += ["--ro-bind", path, path]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--chdir", os.path.realpath(cwd), *argv]
