"""`evalstream up --follow` stopped by SIGTERM (docker stop, systemd) or SIGINT (Ctrl-C):
it stops reading, closes and reports the open episodes, prints the summary."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

SUITE = """\
name: stop
defaultAssertions:
  - type: signal.not
    pattern: "error:*"
  - type: signal.trajectory
    patterns: [harness:start, tool:call, harness:end]
cases: []
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_followed_run_reports_its_open_episodes_when_stopped(
    tmp_path: Path, signum: signal.Signals
) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE, encoding="utf-8")
    source = tmp_path / "live.jsonl"
    lines = [
        {"id": "a", "episode_id": "open-1", "name": "harness:start", "timestamp": 1000},
        {"id": "b", "episode_id": "open-1", "name": "error:boom", "timestamp": 1001},
    ]
    source.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    exe = Path(sys.executable).parent / "evalstream"
    env = {**os.environ, "COLUMNS": "300"}  # one printed line per record
    command = [str(exe), "up", "--suite", str(tmp_path / "suite.yaml"), "--follow", str(source)]
    seen: list[str] = []
    printed: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(
        [*command, "--metrics-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    ) as proc:
        stdout = proc.stdout
        assert stdout is not None

        def read_lines() -> None:
            for line in stdout:
                printed.put(line)

        reader = threading.Thread(target=read_lines)
        reader.start()
        try:
            # The early verdict shows the file was read and the episode is open.
            while not any("signal.not fail early" in line for line in seen):
                seen.append(printed.get(timeout=60))
            proc.send_signal(signum)
            assert proc.wait(timeout=60) == 128 + signum
        finally:
            if proc.poll() is None:
                proc.kill()
            reader.join(timeout=10)
    while not printed.empty():
        seen.append(printed.get())
    text = "".join(seen)
    assert f"{signum.name}: stopping, closing the open episodes" in text
    assert "open-1 (no case) failed: 0/2 assertions" in text
    assert "open-1 [1] signal.trajectory fail at close" in text
    assert "0 passed, 1 failed, 0 errors, 0 unevaluated of 1 episodes; 2 verdicts" in text
