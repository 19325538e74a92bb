"""`evalstream check` uses the Anthropic judge when the environment configures one (here a
local Messages API server), and gives `error`, never `pass`, when it does not; `--judge
module:factory`, the option the error message names, works on every evaluating command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from evalstream.connectors.files.recording import RecordedMessage, RecordingWriter
from tests.graders.judge_helpers import CRITERIA, GOOD, KEYWORDS, honest_judge
from tests.scoring.episodes import make_episode
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


JUDGE_FACTORY = """
from evalstream.assertions.judge.protocol import JudgeVerdict


class KeywordJudge:
    async def judge(self, request):
        return JudgeVerdict(score=0.9 if request.output else 0.1, reasoning="kw")


def make():
    return KeywordJudge()


def not_a_judge():
    return 42
"""


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_every_evaluating_command_takes_the_judge_the_message_names(tmp_path: Path) -> None:
    suite, signals = _files(tmp_path)
    (tmp_path / "judges.py").write_text(JUDGE_FACTORY)
    spec = f"{tmp_path / 'judges.py'}:make"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    without = _check(suite, signals, env)
    [verdict] = without["episodes"][0]["assertions"]  # type: ignore[index]
    assert "set ANTHROPIC_API_KEY or pass --judge" in verdict["message"]
    for command in (
        ["check", "--suite", str(suite), str(signals), "--format", "json"],
        ["replay", str(_recording(tmp_path, signals)), "--suite", str(suite), "-f", "json"],
    ):
        done = _run(*command, "--judge", spec, env=env)
        assert done.returncode == 0, done.stderr
        [verdict] = json.loads(done.stdout)["episodes"][0]["assertions"]
        assert (verdict["verdict"], verdict["message"]) == (
            "pass",
            "judge score 0.90 (min 0.70): kw",
        )
    episodes = tmp_path / "episodes.json"
    episodes.write_text(json.dumps(make_episode("e1", output=GOOD)))
    scored = _run(
        "score", str(episodes), "--suite", str(suite), "--no-baseline", "--judge", spec,
        "-o", str(tmp_path / "r.json"), env=env,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stdout + scored.stderr
    [episode] = json.loads((tmp_path / "r.json").read_text())["episodes"]
    assert episode["assertions"] == {"pass": 1}
    bad = _run(
        "check",
        "--suite",
        str(suite),
        str(signals),
        "--judge",
        spec.replace(":make", ":not_a_judge"),
        env=env,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: --judge ")
    assert "has no `judge(request)` method" in bad.stderr


def _recording(tmp_path: Path, signals: Path) -> Path:
    """The signals as a topic recording (what `evalstream record` writes)."""
    path = tmp_path / "recording.jsonl"
    with RecordingWriter(path, {"topic": "evalstream.signals"}) as writer:
        for offset, line in enumerate(signals.read_bytes().splitlines()):
            key = json.loads(line)["episode_id"].encode()
            writer.write(RecordedMessage("evalstream.signals", 0, offset, 1, key, line))
    return path
