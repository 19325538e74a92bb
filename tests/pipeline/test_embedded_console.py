"""What `evalstream up` prints: failures named at close, rejected lines bounded."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import orjson
from rich.console import Console

from evalstream.assertions.suite_format.suites import load_suite
from evalstream.stream.console.check_table import print_table
from evalstream.stream.console.rejections import RejectionLog
from evalstream.stream.embedded import run_embedded
from evalstream.stream.offline import check_files

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


def many_bad_lines(n: int) -> list[bytes]:
    bad: list[bytes] = []
    for i in range(n):
        bad.append(b"not json %d" % i)  # invalid_json
        bad.append(orjson.dumps({"id": f"x{i}", "episode_id": "e9", "timestamp": 1}))
    return [signal("a", "harness:start", 1000), *bad, signal("c", "harness:end", 1002)]


def test_up_prints_rejected_lines_bounded_and_counted_by_reason(tmp_path: Path) -> None:
    text = run_up(tmp_path, many_bad_lines(10_000))
    lines = text.splitlines()
    assert len(lines) < 40  # 20 rejections one by one, then counts, not 20,000 lines
    assert sum(1 for line in lines if line.startswith("dead letter (")) == 20
    assert "20,000 rejected in all: invalid_json 10,000, missing_name 10,000" in lines


def test_check_prints_rejected_lines_the_same_way(tmp_path: Path) -> None:
    source = tmp_path / "signals.jsonl"
    source.write_bytes(b"\n".join(many_bad_lines(500)) + b"\n")
    (tmp_path / "suite.yaml").write_text(SUITE, encoding="utf-8")
    report = check_files([str(source)], [load_suite(tmp_path / "suite.yaml")])
    out = io.StringIO()
    print_table(report, Console(file=out, width=300, no_color=True))
    lines = out.getvalue().splitlines()
    assert sum(1 for line in lines if line.startswith("rejected ")) == 20
    assert "1,000 rejected in all: invalid_json 500, missing_name 500" in lines
    assert len(lines) < 45


def test_a_live_run_prints_the_counts_at_most_once_per_interval() -> None:
    now = [0.0]
    log = RejectionLog(limit=2, interval_s=10.0, clock=lambda: now[0])
    printed = [log.add("invalid_json", f"line {i}") for i in range(2)]
    assert printed == ["line 0", "line 1"]
    assert (
        log.add("invalid_json", "line 2")
        == "more than 2 rejected: counting them by reason from here"
    )
    assert [log.add("missing_name", "x") for _ in range(100)] == [None] * 100
    now[0] = 10.0
    assert log.add("invalid_json", "y") == "… 102 more rejected: missing_name 100, invalid_json 2"
    assert log.add("invalid_json", "z") is None
    assert log.totals() == [
        "… 1 more rejected: invalid_json 1",
        "105 rejected in all: missing_name 100, invalid_json 5",
    ]
