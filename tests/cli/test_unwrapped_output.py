"""Output that is not a terminal (piped into grep, a log collector, a file) is never
wrapped: a long episode id stays whole on one line, in tables and in live lines."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from evalstream.stream.console.consoles import UNWRAPPED_WIDTH, output_console
from tests.cli.conftest import REPO

SUITE = """\
name: unwrapped
defaultAssertions:
  - type: signal.not
    pattern: "error:*"
cases: []
"""
LONG_ID = "episode-" + "0123456789abcdef" * 12  # 200 characters, wider than any terminal


def write_inputs(tmp_path: Path) -> tuple[Path, Path]:
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    signals = [
        {"id": "a", "episode_id": LONG_ID, "name": "harness:start", "timestamp": 1000},
        {"id": "b", "episode_id": LONG_ID, "name": "error:boom", "timestamp": 1001},
        {"id": "c", "episode_id": LONG_ID, "name": "harness:end", "timestamp": 1002},
    ]
    source = tmp_path / "signals.jsonl"
    source.write_bytes(b"".join(orjson.dumps(s) + b"\n" for s in signals))
    return suite, source


@pytest.mark.parametrize(
    ("command", "stream"),
    [
        (("check",), "stdout"),
        (("up", "--metrics-port", "0"), "stdout"),
        (("up", "--metrics-port", "0", "--out", os.devnull), "stdout"),
        (("up", "--metrics-port", "0", "--out", "-"), "stderr"),
    ],
    ids=["check", "up", "up-out-file", "up-out-stdout"],
)
def test_a_long_episode_id_stays_on_one_line_in_a_pipe(
    tmp_path: Path, command: tuple[str, ...], stream: str
) -> None:
    suite, source = write_inputs(tmp_path)
    exe = Path(sys.executable).parent / "evalstream"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_TERMINAL")}
    done = subprocess.run(
        [str(exe), *command, "--suite", str(suite), str(source)],
        capture_output=True,  # both pipes: not a terminal
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    printed = done.stdout if stream == "stdout" else done.stderr
    whole = [line for line in printed.splitlines() if LONG_ID in line]
    assert whole, printed  # the id printed whole: not folded over several lines
    assert not [line for line in printed.splitlines() if LONG_ID[:40] in line and line not in whole]


def test_a_terminal_console_keeps_rich_wrapping() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    console = output_console(file=Terminal())
    assert console.is_terminal
    assert console.width < UNWRAPPED_WIDTH
    assert not console.soft_wrap
    piped = output_console(file=io.StringIO())
    assert (piped.width, piped.soft_wrap) == (UNWRAPPED_WIDTH, True)
