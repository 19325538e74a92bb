"""`evalstream check` uses the Anthropic judge when the environment configures one (here a
local Messages API server), and gives `error`, never `pass`, when it does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.graders.judge_helpers import CRITERIA, GOOD, KEYWORDS, honest_judge
from tests.support.messages_api import MessagesAPIServer

EXE = Path(sys.executable).parent / "evalstream"


def _files(tmp_path: Path) -> tuple[Path, Path]:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: judged\ndefaultAssertions:\n  - type: llm.judge\n"
        f"    criteria: {json.dumps(list(CRITERIA))}\n    minScore: 0.7\n"
    )
    signals = tmp_path / "signals.jsonl"
    lines = [
        {"id": "a", "episode_id": "e1", "name": "harness:start",
         "timestamp": "2026-11-01T00:00:00Z", "payload": {}},
        {"id": "b", "episode_id": "e1", "name": "harness:end",
         "timestamp": "2026-11-01T00:00:01Z", "payload": {"output": GOOD}},
    ]  # fmt: skip
    signals.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return suite, signals


def _check(suite: Path, signals: Path, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [str(EXE), "check", "--suite", str(suite), str(signals), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_check_asks_the_configured_judge(tmp_path: Path) -> None:
    suite, signals = _files(tmp_path)
    with MessagesAPIServer(handler=honest_judge(KEYWORDS)) as server:
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": "sk-ant-test-key",
            "ANTHROPIC_BASE_URL": server.base_url,
        }
        report = _check(suite, signals, env)
        assert len(server.requests) == 1
    episodes = report["episodes"]
    assert isinstance(episodes, list)
    [verdict] = episodes[0]["assertions"]
    assert verdict["verdict"] == "pass", verdict


def test_without_a_key_llm_judge_is_an_error_not_a_pass(tmp_path: Path) -> None:
    suite, signals = _files(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    report = _check(suite, signals, env)
    episodes = report["episodes"]
    assert isinstance(episodes, list)
    [verdict] = episodes[0]["assertions"]
    assert verdict["verdict"] == "error"
