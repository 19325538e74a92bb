"""`cmd:` targets under `--sandbox`, through the real bwrap: the agent still runs, and what it
must not reach (a secret file beside its directory, the evaluator's environment and
processes, a listener on 127.0.0.1) stays out of reach."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assertions.errors import InputError
from connectors.sandboxing.bwrap import probe_bwrap
from connectors.targets.spec import parse_target
from stream.evalruns.runner import RunSettings, run_dataset
from tests.evals.conftest import make_suite

needs_bwrap = pytest.mark.skipif(
    probe_bwrap().error is not None, reason=f"no working bwrap here: {probe_bwrap().error}"
)
SAY = [{"type": "output.contains", "text": "hello"}]

PROBE = """
import json, os, socket, sys
found = {}
try:
    found["secret"] = open(SECRET).read()
except OSError as exc:
    found["secret"] = type(exc).__name__
found["env"] = sorted(os.environ)
found["evaluator_visible"] = os.path.exists(f"/proc/{sys.argv[1]}")
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=1).close()
    found["connect"] = "connected"
except OSError as exc:
    found["connect"] = type(exc).__name__
print(json.dumps({"name": "agent:activated", "payload": {"agent": "probe", "found": found}}))
"""


def run(spec: str, cwd: Path) -> Any:
    suite = make_suite([{"id": "s", "input": {}, "assertions": SAY}])
    target = parse_target(spec, cwd, sandbox=True)
    return asyncio.run(run_dataset(suite, target, RunSettings()))


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


@needs_bwrap
def test_a_sandboxed_agent_reaches_nothing_of_the_evaluator(
    tmp_path: Path, listener: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALSTREAM_TEST_SECRET", "env-secret-value")
    secret = tmp_path / "secret.txt"
    secret.write_text("the-evaluator-secret")
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "probe.py").write_text(f"SECRET = {str(secret)!r}\n{PROBE}")
    spec = f"cmd:{sys.executable} {agent_dir / 'probe.py'} {os.getpid()} {listener}"
    result = run(spec, agent_dir)
    sample = result.cases[0].samples[0]
    assert sample.error is None, sample.error
    [activated] = [s for s in sample.signals if s["name"] == "agent:activated"]
    found = activated["payload"]["found"]
    assert found["secret"] == "FileNotFoundError"
    assert "EVALSTREAM_TEST_SECRET" not in found["env"]
    assert set(found["env"]) <= {
        "PATH", "HOME", "TMPDIR", "LANG", "PWD", "EVALSTREAM_CASE_ID", "EVALSTREAM_EPISODE_ID"
    }  # fmt: skip
    assert found["evaluator_visible"] is False
    assert found["connect"] == "ConnectionRefusedError"
    assert "env-secret-value" not in json.dumps(sample.signals)


def test_only_cmd_targets_take_the_sandbox() -> None:
    with pytest.raises(InputError, match="cmd: targets only"):
        parse_target("tests.evals.targets_for_tests:echo", sandbox=True)


def test_without_bwrap_the_sandboxed_target_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe_bwrap.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    try:
        with pytest.raises(InputError, match="install bubblewrap"):
            parse_target(f"cmd:{sys.executable} -c pass", sandbox=True)
    finally:
        probe_bwrap.cache_clear()
