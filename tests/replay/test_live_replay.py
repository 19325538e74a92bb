"""Live replay against a local Messages API server: the recorded requests are re-issued and
each candidate episode is scored against its recorded original."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson

from evalstream.connectors.files.recording import RecordedMessage, RecordingWriter
from tests.replay.helpers import cli
from tests.support.messages_api import (
    ErrorReply,
    MessagesAPIServer,
    MessagesRequest,
    Reply,
    Usage,
)

MODEL = "claude-sonnet-4-5"  # priced, so cost is scored
SUITE = """name: review
defaultAssertions:
  - type: output.contains
    text: injection
"""
PROMPT_A = "Review: query = f'SELECT {user_id}'"
REQUEST_A: dict[str, object] = {
    "model": MODEL,
    "max_tokens": 512,
    "system": "You review code.",
    "messages": [{"role": "user", "content": PROMPT_A}],
}


def signal(episode: str, n: int, name: str, ts: int, payload: object, **extra: object) -> bytes:
    body = {"id": f"{episode}-{n}", "episode_id": episode, "name": name, "timestamp": ts}
    body.update(extra)
    body["payload"] = payload
    return orjson.dumps(body)


def recording(path: Path) -> None:
    """ep-a on the signals topic (the request in provider:start), ep-b as an LLM-call record
    on the llm-calls topic plus its other signals, ep-c with a call the server rejects."""
    t = 1_700_000_000_000
    attrs = {"agent_id": "reviewer", "case_id": "sql"}
    signals: list[tuple[str, bytes]] = [
        ("ep-a", signal("ep-a", 0, "harness:start", t, {}, attrs=attrs)),
        (
            "ep-a",
            signal(
                "ep-a",
                1,
                "provider:start",
                t + 10,
                {"model": MODEL, "input": REQUEST_A},
                source={"agent": "reviewer"},
            ),
        ),
        ("ep-a", signal("ep-a", 2, "text:complete", t + 1900, {"content": "SQL injection found"})),
        (
            "ep-a",
            signal(
                "ep-a",
                3,
                "provider:end",
                t + 2010,
                {
                    "output": {
                        "content": "SQL injection found",
                        "toolCalls": [],
                        "usage": {"inputTokens": 1000, "outputTokens": 400},
                    },
                    "durationMs": 2000,
                },
                source={"agent": "reviewer", "parent": "ep-a-1"},
            ),
        ),
        ("ep-a", signal("ep-a", 4, "tool:call", t + 2100, {"name": "Read"})),
        (
            "ep-a",
            signal(
                "ep-a",
                5,
                "harness:end",
                t + 3000,
                {"output": "SQL injection found", "durationMs": 3000},
            ),
        ),
        (
            "ep-b",
            signal(
                "ep-b", 0, "harness:start", t, {}, attrs={"agent_id": "reviewer", "case_id": "slow"}
            ),
        ),
        (
            "ep-c",
            signal(
                "ep-c", 0, "harness:start", t, {}, attrs={"agent_id": "reviewer", "case_id": "err"}
            ),
        ),
        (
            "ep-c",
            signal(
                "ep-c",
                1,
                "provider:start",
                t + 10,
                {"model": MODEL, "input": [{"role": "user", "content": "reject me"}]},
                source={"agent": "reviewer"},
            ),
        ),
        (
            "ep-c",
            signal(
                "ep-c",
                2,
                "provider:end",
                t + 60,
                {
                    "output": {
                        "content": "an injection",
                        "usage": {"inputTokens": 10, "outputTokens": 10},
                    },
                    "durationMs": 50,
                },
                source={"agent": "reviewer", "parent": "ep-c-1"},
            ),
        ),
        ("ep-c", signal("ep-c", 3, "harness:end", t + 100, {"durationMs": 100})),
    ]
    call_b = {
        "id": "call-b",
        "episode_id": "ep-b",
        "timestamp": t + 10,
        "durationMs": 50,
        "model": MODEL,
        "provider": "anthropic",
        "agent": "reviewer",
        "input": {
            "model": MODEL,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "slow one"}],
        },
        "output": {
            "content": "possible injection",
            "usage": {"inputTokens": 20, "outputTokens": 10},
        },
    }
    end_b = signal(
        "ep-b", 9, "harness:end", t + 500, {"output": "possible injection", "durationMs": 500}
    )
    with RecordingWriter(path, {"topic": "evalstream.signals"}) as writer:
        for offset, (key, value) in enumerate(signals[:6]):
            writer.write(RecordedMessage("evalstream.signals", 0, offset, t, key.encode(), value))
        writer.write(
            RecordedMessage("evalstream.llm-calls", 0, 0, t, b"ep-b", orjson.dumps(call_b))
        )
        for offset, (key, value) in enumerate(signals[6:], start=6):
            writer.write(RecordedMessage("evalstream.signals", 0, offset, t, key.encode(), value))
        writer.write(RecordedMessage("evalstream.signals", 0, 99, t, b"ep-b", end_b))


def handler(request: MessagesRequest) -> Reply | ErrorReply:
    text = request.last_user_text
    if "reject" in text:
        return ErrorReply(400, "this candidate refuses")
    if "slow" in text:
        return Reply.text("an injection, maybe", usage=Usage(20, 10), delay=0.3)
    return Reply.text("Looks fine to me.", usage=Usage(1000, 100))


def test_live_replay_scores_each_candidate_against_its_recording(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl.zst"
    recording(rec)
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    with MessagesAPIServer(handler=handler) as server:
        env = {**os.environ, "CANDIDATE_KEY": "sk-test-candidate"}
        proc = cli(
            "replay",
            str(rec),
            "--mode",
            "live",
            "--base-url",
            server.base_url,
            "--model",
            "claude-haiku-4-5",
            "--api-key-env",
            "CANDIDATE_KEY",
            "--suite",
            str(suite),
            "--format",
            "json",
            "--episode-suffix",
            "~cand",
            env=env,
        )
        requests = [r for r in server.requests if r.path == "/v1/messages"]
    assert proc.returncode == 1, proc.stderr  # ep-a's candidate misses the injection
    report = json.loads(proc.stdout)
    pairs = {p["original"]: p for p in report["episodes"]}
    assert set(pairs) == {"ep-a", "ep-b", "ep-c"}

    # The recorded requests went out as recorded, with the candidate model and key.
    assert len(requests) == 3
    sent = {r.body["messages"][0]["content"]: r for r in requests}
    first = sent[PROMPT_A]
    assert first.body["model"] == "claude-haiku-4-5"
    assert first.body["system"] == REQUEST_A["system"]
    assert first.body["max_tokens"] == 512
    assert first.api_key == "sk-test-candidate"

    a = pairs["ep-a"]
    assert a["candidate"] == "ep-a~cand"
    assert a["original_status"] == "passed"
    assert a["candidate_status"] == "failed"  # its own answer, not the recorded one
    assert a["candidate_result"]["output"] == "Looks fine to me."
    assert a["scores"]["baseline"].startswith("recording:ep-a")
    assert a["scores"]["correctness"] == 0.0
    assert a["scores"]["cost_delta_pct"] < 0  # fewer output tokens, cheaper model
    assert a["scores"]["latency_delta_pct"] < 0  # faster than the recorded 2 s call
    assert a["scores"]["tool_match"] == 1.0  # open loop: the recorded tool calls stay
    assert {(x["severity"], x["dimension"]) for x in a["alerts"]} >= {("critical", "correctness")}
    assert a["passed"] is False
    assert a["calls"] == {"reissued": 1, "failed": 0, "kept_as_recorded": 0}

    b = pairs["ep-b"]  # an LLM-call record; the candidate is 0.3 s slower than the 50 ms call
    assert b["candidate_status"] == "passed"
    assert b["scores"]["latency_delta_pct"] >= 49.0  # (500 + 300 - 50) / 500 - 1 at least
    assert any(x["dimension"] == "latency" for x in b["alerts"])

    c = pairs["ep-c"]  # the candidate refuses: an error step, and no answer at all
    assert c["calls"]["failed"] == 1
    assert c["scores"]["safety"] < 1.0
    assert c["candidate_result"]["metrics"]["errors"] == 1
    assert report["summary"]["reissued_calls"] == 3


def test_live_mode_needs_a_base_url(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    recording(rec)
    proc = cli("replay", str(rec), "--mode", "live", "--suite", "x.yaml")
    assert proc.returncode == 2
    assert "--mode live needs --base-url" in proc.stderr


def test_live_replay_prints_a_table(tmp_path: Path) -> None:
    fmt = "table"
    rec = tmp_path / "rec.jsonl"
    recording(rec)
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    with MessagesAPIServer(handler=handler) as server:
        proc = cli(
            "replay",
            str(rec),
            "--mode",
            "live",
            "--base-url",
            server.base_url,
            "--suite",
            str(suite),
            "--format",
            fmt,
            env={**os.environ, "COLUMNS": "200"},  # rich wraps at the terminal's width
        )
    assert proc.returncode == 1, proc.stderr
    assert "ep-a@candidate" in proc.stdout  # the default suffix
    assert "critical correctness" in proc.stdout
    assert "3 calls re-issued, 1 failed" in proc.stderr
