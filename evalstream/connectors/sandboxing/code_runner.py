"""Which `CodeRunner` runs graded code: the bubblewrap sandbox, or nothing at all.

Graded code runs in `BwrapSandbox`. Where it cannot be set up (no `bwrap`, or user
namespaces denied; probed once per process) the code is refused — every case is an `error`
naming the fix — unless the user opted out explicitly (`--no-sandbox`, or
`EVALSTREAM_SANDBOX=off`), in which case the limited but unconfined `SubprocessSandbox` runs
it and each grade says `sandbox: off`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from evalstream.assertions.graders.function_output import CodeRunner, SandboxLimits, SandboxRun
from evalstream.connectors.sandboxing.bwrap import (
    BwrapSandbox,
    SandboxUnavailableError,
    probe_bwrap,
)
from evalstream.connectors.sandboxing.limited_subprocess import SubprocessSandbox

SANDBOX_ENV = "EVALSTREAM_SANDBOX"
OPT_OUT_VALUES = frozenset({"off", "0", "false", "no"})


def sandbox_opted_out(flag: bool = False) -> bool:
    """`--no-sandbox`, or `EVALSTREAM_SANDBOX=off`."""
    return flag or os.environ.get(SANDBOX_ENV, "").strip().lower() in OPT_OUT_VALUES


class RefusingRunner:
    """Stands in for the sandbox where it cannot run: graded code is never run unconfined."""

    isolation = "unavailable"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def run_python(
        self, files: Mapping[str, str], entry: str, stdin: str, limits: SandboxLimits
    ) -> SandboxRun:
        raise SandboxUnavailableError(
            f"graded code refused: {self.reason}; or, to run it without isolation on a "
            f"machine you trust with it, pass --no-sandbox or set {SANDBOX_ENV}=off"
        )


def code_runner(no_sandbox: bool = False) -> CodeRunner:
    """The runner for graded code under the user's choice (see the module docstring)."""
    if sandbox_opted_out(no_sandbox):
        return SubprocessSandbox()
    probe = probe_bwrap()
    if probe.error is not None:
        return RefusingRunner(probe.error)
    return BwrapSandbox()
