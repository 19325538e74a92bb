"""Graded code trying to escape the bubblewrap sandbox, through the real `bwrap`.

Every attempt must be denied or stopped: the case fails with a reason saying what happened,
the grader returns within its timeout plus a margin (a liveness bound, not a speed check),
the evaluator (this test process) survives and nothing outside the sandbox changes.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalstream.assertions.graders.function_output import (
    FunctionOutputConfig,
    grade_function_output,
)
from evalstream.assertions.graders.result import GradeResult
from evalstream.connectors.sandboxing import bwrap as bwrap_sandbox
from evalstream.connectors.sandboxing.bwrap import BwrapSandbox, probe_bwrap
from evalstream.connectors.sandboxing.code_runner import RefusingRunner, code_runner

TIMEOUT_S = 2.0
LIVENESS_MARGIN_S = 10.0

pytestmark = pytest.mark.skipif(
    probe_bwrap().error is not None, reason=f"no working bwrap here: {probe_bwrap().error}"
)


def grade(code: str, *args: Any, expected: Any = "escaped") -> tuple[GradeResult, dict[str, Any]]:
    config = FunctionOutputConfig(
        function_name="attempt",
        test_cases=[{"args": list(args), "expected": expected}],
        timeout_per_case=TIMEOUT_S,
        memory_mb=256,
    )
    started = time.monotonic()
    result = grade_function_output(code, config, BwrapSandbox())
    assert time.monotonic() - started < TIMEOUT_S + LIVENESS_MARGIN_S
    assert result.status == "fail", result
    assert result.details["sandbox"] == "bwrap"
    case: dict[str, Any] = result.details["test_results"][0]
    return result, case


def test_a_secret_file_of_the_evaluator_is_not_there(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the-evaluator-secret")
    _, case = grade("def attempt(path):\n    return open(path).read()\n", str(secret))
    assert case["error"].startswith("FileNotFoundError"), case
    assert "the-evaluator-secret" not in repr(case)


@pytest.mark.parametrize("path", ["/etc/shadow", "/etc/passwd", "/root", "/work", "/home"])
def test_the_rest_of_the_file_system_is_not_there(path: str) -> None:
    _, case = grade("import os\ndef attempt(path):\n    return os.listdir(path)\n", path)
    prefix = Path(os.path.realpath(sys.base_prefix))
    if Path(path) in prefix.parents:
        # the interpreter's prefix lives here (e.g. /root/.pyenv): only the way to it shows
        assert case["output"] == [prefix.relative_to(path).parts[0]], case
    else:
        assert case["error"].startswith(("FileNotFoundError", "NotADirectoryError")), case


def test_the_suite_and_the_working_tree_are_not_there() -> None:
    here = str(Path(__file__).resolve())
    _, case = grade("def attempt(path):\n    return open(path).read()\n", here)
    assert case["error"].startswith("FileNotFoundError"), case


def test_writes_outside_the_scratch_dir_are_refused(tmp_path: Path) -> None:
    name = f"planted-{secrets.token_hex(4)}.txt"
    target = tmp_path / name
    code = """
def attempt(paths):
    outcomes = []
    for path in paths:
        try:
            with open(path, "w") as handle:
                handle.write("planted")
            outcomes.append("written " + path)
        except OSError as exc:
            outcomes.append(type(exc).__name__)
    return outcomes
"""
    interpreter_dir = os.path.dirname(os.path.realpath(sys.executable))
    paths = [str(target), f"/usr/{name}", f"{interpreter_dir}/{name}"]
    _, case = grade(code, paths)
    assert not any(str(o).startswith("written") for o in case["output"]), case
    assert not target.exists()
    assert not Path("/usr", name).exists()
    assert not Path(interpreter_dir, name).exists()


def test_the_evaluator_cannot_be_signalled() -> None:
    code = """
import os, signal
def attempt(evaluator):
    os.kill(os.getppid(), signal.SIGKILL)
    os.kill(evaluator, signal.SIGKILL)
    return "escaped"
"""
    _, case = grade(code, os.getpid())
    assert case["error"].startswith("ProcessLookupError"), case
    os.kill(os.getpid(), 0)  # still here


def test_the_evaluators_processes_are_not_visible() -> None:
    code = """
import os
def attempt(evaluator):
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    try:
        cmdline = open(f"/proc/{evaluator}/cmdline").read()
    except OSError as exc:
        cmdline = type(exc).__name__
    return {"pids": pids, "evaluator_cmdline": cmdline}
"""
    _, case = grade(code, os.getpid())
    seen = case["output"]
    assert os.getpid() not in seen["pids"]
    assert max(seen["pids"]) < 10, seen  # only the sandbox's own PID namespace
    assert seen["evaluator_cmdline"] == "FileNotFoundError"


def test_the_evaluators_environment_is_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSTREAM_TEST_SECRET", "env-secret-value")
    code = """
import os
def attempt():
    seen = dict(os.environ)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                seen[pid] = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
            except OSError as exc:
                seen[pid] = type(exc).__name__
    return seen
"""
    _, case = grade(code)
    assert "env-secret-value" not in repr(case)
    own = {k for k in case["output"] if not k.isdigit()}
    assert own <= {"PATH", "HOME", "TMPDIR", "LANG", "PWD"}, own


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            received.append(conn.recv(100))
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    stop.set()
    thread.join()
    server.close()


def test_a_listener_of_the_evaluator_is_unreachable(listener: tuple[int, list[bytes]]) -> None:
    port, received = listener
    code = """
import socket
import sys
def attempt(port):
    with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
        conn.sendall(b"escaped")
    return "escaped"
"""
    _, case = grade(code, port)
    assert case["error"].startswith("ConnectionRefusedError"), case
    assert received == []


def test_a_fork_bomb_is_bounded() -> None:
    code = """
import os
def attempt():
    forked = 0
    try:
        while True:
            if os.fork() == 0:
                while True:
                    try:
                        os.fork()
                    except OSError:
                        pass
            forked += 1
    except OSError as exc:
        return f"stopped after {forked}: {exc}"
"""
    _, case = grade(code)
    assert case.get("error") == "timeout" or "Resource temporarily unavailable" in str(
        case.get("output")
    ), case


def test_filling_memory_is_stopped() -> None:
    code = "def attempt():\n    hog = []\n    while True:\n        hog.append(bytearray(10**7))\n"
    _, case = grade(code)
    assert case["error"].startswith("MemoryError"), case


def test_filling_the_disk_is_stopped(tmp_path: Path) -> None:
    code = """
def attempt():
    written = 0
    chunk = b"x" * (1 << 20)
    index = 0
    while True:
        with open(f"fill-{index}.bin", "wb") as handle:
            for _ in range(8):
                handle.write(chunk)
                written += len(chunk)
        index += 1
"""
    _, case = grade(code)
    assert case["error"].startswith("OSError"), case
    assert "No space left on device" in case["error"] or "File too large" in case["error"]


def test_sleeping_forever_is_stopped() -> None:
    _, case = grade("import time\ndef attempt():\n    time.sleep(3600)\n")
    assert case["error"] == "timeout"


DETACHED_CHILD = """
import os, sys, time
def attempt(hang):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            while True:
                sys.stdout.write("still here\\n")
                sys.stdout.flush()
                time.sleep(0.1)
        os._exit(0)
    if hang:
        time.sleep(3600)
    return "detached"
"""


def test_a_detached_child_holding_the_pipes_dies_with_the_timeout() -> None:
    _, case = grade(DETACHED_CHILD, True)
    assert case["error"] == "timeout"


def test_a_detached_child_dies_with_the_solution() -> None:
    # The solution returns at once; its detached grandchild, still holding stdout, must not
    # keep the case running until the timeout.
    _, case = grade(DETACHED_CHILD, False, expected="stays attached")
    assert case["output"] == "detached"
    assert "error" not in case


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    probe_bwrap.cache_clear()
    yield
    probe_bwrap.cache_clear()


@pytest.mark.usefixtures("fresh_probe")
def test_without_bwrap_graded_code_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("EVALSTREAM_SANDBOX", raising=False)
    runner = code_runner()
    assert isinstance(runner, RefusingRunner)
    config = FunctionOutputConfig(function_name="f", test_cases=[{"args": [], "expected": 1}])
    result = grade_function_output("def f():\n    return 1\n", config, runner)
    assert result.status == "error"
    assert result.error is not None
    assert "bubblewrap" in result.error
    assert "EVALSTREAM_SANDBOX=off" in result.error
    assert result.details["sandbox"] == "unavailable"


@pytest.mark.usefixtures("fresh_probe")
def test_without_bwrap_an_explicit_opt_out_runs_unsandboxed_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("EVALSTREAM_SANDBOX", "off")
    config = FunctionOutputConfig(function_name="f", test_cases=[{"args": [], "expected": 1}])
    result = grade_function_output("def f():\n    return 1\n", config, code_runner())
    assert result.status == "pass"
    assert result.details["sandbox"] == "off"
    assert bwrap_sandbox.probe_bwrap().error is not None  # bwrap really was out of reach


class BrokenBwrap(BwrapSandbox):
    """The real bwrap given an option it rejects: the sandbox cannot start."""

    def command(self, *args: Any) -> list[str]:
        real = super().command(*args)
        return [real[0], "--no-such-option", *real[1:]]


def test_a_sandbox_that_cannot_start_is_an_error_not_a_fail() -> None:
    config = FunctionOutputConfig(function_name="f", test_cases=[{"args": [], "expected": 1}])
    result = grade_function_output("def f():\n    return 1\n", config, BrokenBwrap())
    assert result.status == "error"
    assert result.error is not None
    assert "bwrap could not start the sandbox" in result.error
