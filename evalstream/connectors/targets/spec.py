"""Target specs as written on the command line and in variants.yaml.

    module:function | path/to/file.py:function    a Python callable (sync or async)
    http://host:port/path | https://…             an HTTP endpoint (POST per case)
    cmd:COMMAND ARGS…                             a subprocess (JSONL signals on stdout)

Relative paths (files, commands' working directory) are resolved against `base_dir`: the
current directory for `--target`, the variants file's directory for variants.
"""

from __future__ import annotations

from pathlib import Path

from evalstream.assertions.errors import InputError
from evalstream.connectors.targets.base import Target
from evalstream.connectors.targets.http_target import HttpTarget
from evalstream.connectors.targets.python_callable import CallableTarget
from evalstream.connectors.targets.subprocess_target import SubprocessTarget


def parse_target(spec: str, base_dir: str | Path = ".", *, sandbox: bool = False) -> Target:
    """`sandbox=True` runs a `cmd:` target inside bubblewrap; other kinds refuse it."""
    spec = spec.strip()
    if sandbox and not spec.startswith("cmd:"):
        raise InputError(
            f"--sandbox applies to cmd: targets only, not {spec!r} (a Python callable runs "
            "inside the evaluator, an HTTP target elsewhere)"
        )
    if spec.startswith(("http://", "https://")):
        return HttpTarget(spec)
    if spec.startswith("cmd:"):
        return SubprocessTarget(spec[4:].strip(), cwd=base_dir, sandbox=sandbox)
    if spec.startswith("python:"):
        spec = spec[len("python:") :]
    return CallableTarget(spec, base_dir=base_dir)
