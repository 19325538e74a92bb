"""A command as a target: the case goes to stdin, signals come back as JSONL on stdout.

`cmd:python agent.py --fast` runs `python agent.py --fast` (split like a shell would, no shell)
in its own process group, writes `{caseId, episodeId, input, attrs, config}` as one JSON
document to its stdin and closes it, and reads one signal object per stdout line as they
come (a line without `timestamp` is stamped when it arrives). The environment also carries
EVALSTREAM_CASE_ID and EVALSTREAM_EPISODE_ID. Exit status ≠ 0 is a target error with the end
of stderr. On timeout or cancellation the whole process group gets SIGTERM, then SIGKILL after
`kill_grace_s`: nothing is left running. With `sandbox=True` the command runs inside bubblewrap
(`evalstream.connectors.targets.sandboxed_command`) with none of the evaluator's environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from pathlib import Path
from typing import Any

import orjson

from evalstream.assertions.errors import InputError, TargetError
from evalstream.connectors.targets.base import TargetCall, TargetOutput
from evalstream.connectors.targets.sandboxed_command import sandboxed_argv

JSON = Any
STDERR_TAIL = 600
LINE_LIMIT = 16 * 1024 * 1024


class SubprocessTarget:
    def __init__(
        self,
        command: str,
        *,
        cwd: str | Path | None = None,
        env: dict[str, str] | None = None,
        kill_grace_s: float = 2.0,
        sandbox: bool = False,
    ) -> None:
        self.command = command
        self.argv = shlex.split(command)
        if not self.argv:
            raise InputError("target `cmd:` needs a command, e.g. `cmd:python agent.py`")
        self.cwd = str(cwd) if cwd is not None else None
        self.env = env or {}
        self.kill_grace_s = kill_grace_s
        self.sandbox = sandbox
        if sandbox:  # fail now, naming the fix, rather than at the first case
            sandboxed_argv(self.argv, self.cwd or ".", {})

    def describe(self) -> str:
        return f"cmd:{self.command}"

    async def aclose(self) -> None:
        return None

    async def run(self, call: TargetCall) -> TargetOutput:
        own = {
            **self.env,
            "EVALSTREAM_CASE_ID": call.case_id,
            "EVALSTREAM_EPISODE_ID": call.episode_id,
        }
        argv, env = self.argv, {**os.environ, **own}
        if self.sandbox:
            argv = sandboxed_argv(self.argv, self.cwd or ".", own)
            env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}  # bwrap's own: see sandboxing.bwrap
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                start_new_session=True,  # its own process group: we can stop all of it
                limit=LINE_LIMIT,
            )
        except OSError as exc:
            raise InputError(f"cannot start target command {self.command!r}: {exc}") from exc
        try:
            return await self._talk(proc, call)
        except BaseException:
            await self._stop(proc)
            raise

    async def _talk(self, proc: asyncio.subprocess.Process, call: TargetCall) -> TargetOutput:
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stderr is not None
        stderr_task = asyncio.ensure_future(proc.stderr.read())
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(orjson.dumps(call.request_body()) + b"\n")
                await proc.stdin.drain()
                proc.stdin.close()
            line_no = 0
            while line := await proc.stdout.readline():
                line_no += 1
                if not line.strip():
                    continue
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise TargetError(
                        f"{self.describe()}: stdout line {line_no} is not JSON: {exc}",
                        kind="signals",
                    ) from exc
                if isinstance(obj, dict):
                    obj.setdefault("timestamp", time.time() * 1000.0)
                call.received.append(obj)
            code = await proc.wait()
            stderr = await stderr_task
        finally:
            if not stderr_task.done():
                stderr_task.cancel()
        if code != 0:
            tail = stderr[-STDERR_TAIL:].decode("utf-8", "replace").strip()
            raise TargetError(
                f"{self.describe()} exited with status {code}: {tail or '(no stderr)'}"
            )
        return TargetOutput(list(call.received))

    async def _stop(self, proc: asyncio.subprocess.Process) -> None:
        """SIGTERM the process group, SIGKILL it after the grace period, reap the child."""
        if proc.returncode is not None:
            return
        for sig, wait in ((signal.SIGTERM, self.kill_grace_s), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                await asyncio.shield(asyncio.wait_for(proc.wait(), wait))
                return
            except TimeoutError:
                continue
