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

from evalstream.assertions.errors import InputError
from evalstream.connectors.sandboxing.bwrap import probe_bwrap
from evalstream.connectors.targets.spec import parse_target
from evalstream.stream.evalruns.runner import RunSettings, run_dataset
from tests.evals.conftest import Run, make_suite

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "agent"

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


def test_matrix_sandbox_refuses_a_variant_that_is_no_command(evalstream: Run) -> None:
    done = evalstream(
        "matrix",
        str(EXAMPLE / "dataset.yaml"),
        "--variants",
        str(EXAMPLE / "variants.yaml"),
        "--no-progress",
        "--sandbox",
    )
    assert done.returncode == 2, done.stderr
    assert "--sandbox applies to cmd: targets only" in done.stderr
    assert "support_agent.py:run" in done.stderr


@needs_bwrap
def test_matrix_sandbox_runs_each_command_variant_inside_bwrap(
    evalstream: Run, tmp_path: Path, listener: int
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the-evaluator-secret")
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "probe.py").write_text(f"SECRET = {str(secret)!r}\n{PROBE}")
    dataset = tmp_path / "dataset.yaml"
    dataset.write_text(
        "name: probe\ncases:\n  - id: s\n    input: {}\n    assertions:\n"
        "      - {type: output.contains, text: hello}\n"
    )
    command = f"cmd:{sys.executable} probe.py {os.getpid()} {listener}"
    variants = agent_dir / "variants.yaml"  # targets run from the variants file's folder
    variants.write_text(
        "baseline: a\nvariants:\n"
        f"  - {{id: a, target: {json.dumps(command)}}}\n"
        f"  - {{id: b, target: {json.dumps(command)}}}\n"
    )
    out = tmp_path / "m.json"
    done = evalstream(
        "matrix",
        str(dataset),
        "--variants",
        str(variants),
        "--no-progress",
        "--sandbox",
        "--out",
        str(out),
    )
    assert done.returncode in (0, 1), done.stderr
    text = out.read_text()
    assert "the-evaluator-secret" not in text
    found = [
        s["payload"]["found"]
        for variant in json.loads(text)["variants"]
        for case in variant["result"]["cases"]
        for sample in case["samples"]
        for s in sample["signals"]
        if s["name"] == "agent:activated"
    ]
    assert len(found) == 2, text[:2000]
    assert all(f["secret"] == "FileNotFoundError" for f in found)
    assert all(f["evaluator_visible"] is False for f in found)
    assert all(f["connect"] == "ConnectionRefusedError" for f in found)


def test_harness_sandbox_needs_a_target(evalstream: Run) -> None:
    done = evalstream(
        "harness",
        "run",
        "--suite",
        str(REPO / "examples" / "eval-harness" / "eval-suite.yaml"),
        "--outputs",
        str(REPO / "examples" / "eval-harness" / "outputs.json"),
        "--sandbox",
    )
    assert done.returncode == 2, done.stderr
    assert "--sandbox runs the --target in the sandbox" in done.stderr
