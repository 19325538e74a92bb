"""What `evalstream up` prints: failures named at close, rejected lines bounded."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import orjson
from rich.console import Console

from assertions.suites import load_suite
from stream.embedded import run_embedded

SUITE = """\
name: close failures
defaultAssertions:
  - type: signal.not
    pattern: "error:*"
  - type: signal.trajectory
    patterns: [harness:start, tool:call, harness:end]
cases: []
"""


def signal(i: str, name: str, ts: int, episode: str = "e1") -> bytes:
    return orjson.dumps({"id": i, "episode_id": episode, "name": name, "timestamp": ts})


def run_up(tmp_path: Path, lines: list[bytes]) -> str:
    (tmp_path / "suite.yaml").write_text(SUITE, encoding="utf-8")
    source = tmp_path / "signals.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    out = io.StringIO()
    console = Console(file=out, width=300, no_color=True)
    suites = [load_suite(tmp_path / "suite.yaml")]
    asyncio.run(run_embedded([str(source)], suites, console=console))
    return out.getvalue()


def test_a_failure_decided_at_close_is_named_like_an_early_one(tmp_path: Path) -> None:
    text = run_up(
        tmp_path,
        [
            signal("a", "harness:start", 1000),
            signal("b", "error:boom", 1001),
            signal("c", "harness:end", 1002),
        ],
    )
    lines = text.splitlines()
    early = [line for line in lines if "[0] signal.not" in line]
    at_close = [line for line in lines if "[1] signal.trajectory" in line]
    # The early verdict is printed once (not repeated at close); the one decided at close
    # is printed with its index, type and message after the episode line.
    assert early == [
        "e1 [0] signal.not fail early at b: forbidden signal error:boom (b) matches error:*"
    ]
    assert at_close == [
        "e1 [1] signal.trajectory fail at close: matched 1 of 3 steps; missing step 2: tool:call"
    ]
    assert lines.index(at_close[0]) == lines.index("e1 (no case) failed: 0/2 assertions, ended") + 1


def test_a_passing_episode_prints_no_assertion_lines(tmp_path: Path) -> None:
    text = run_up(
        tmp_path,
        [
            signal("a", "harness:start", 1000),
            signal("b", "tool:call", 1001),
            signal("c", "harness:end", 1002),
        ],
    )
    assert "e1 (no case) passed: 2/2 assertions, ended" in text
    assert "[0]" not in text
    assert "[1]" not in text
