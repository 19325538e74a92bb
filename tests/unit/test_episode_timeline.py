"""The drill-down's assembly: instances of a reopened id, verdicts at their signals, scores
and alerts, from records as the worker publishes them (no broker: the records are data)."""

from __future__ import annotations

from typing import Any

from evalstream.assertions.reports.episode_timeline import (
    EpisodeEvidence,
    assemble_timeline,
    render_text,
)
from evalstream.assertions.wire.signals import Signal

EID = "ep-1"
DAY_1 = 1_767_225_600_000.0  # 2026-01-01T00:00:00Z
DAY_2 = 1_767_312_000_000.0  # 2026-01-02T00:00:00Z


def signal(sid: str, name: str, ts: float, parent: str | None = None) -> Signal:
    return Signal(sid, EID, name, ts, parent=parent)


def episode(first: str, started_at: str, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "dedupe_key": f"{EID}@{first}",
        "episode_id": EID,
        "status": status,
        "close_reason": "ended",
        "signals": 2,
        "started_at": started_at,
        "ended_at": started_at,
        "attrs": {"agent_id": "bot"},
        "assertions": [
            {
                "index": 0,
                "type": "signal.not",
                "suite": "s",
                "rule": "r1",
                "verdict": "fail" if status == "failed" else "pass",
                "message": f"forbidden tool:call in {first}",
                "decided_at": f"{first}-2",
            }
        ],
        **extra,
    }


def verdict(first: str) -> dict[str, Any]:
    record = episode(first, "", "failed")["assertions"][0]
    return {
        "dedupe_key": f"{EID}@{first}/s/0/r1",
        "episode_id": EID,
        "early": True,
        "decided_at_time": "2026-01-01T00:00:01.000Z",
        **record,
    }


SCORES = {
    "baseline": "rolling [agent_id=bot]",
    "overall": 0.41,
    "correctness": 0.0,
    "cost": 0.5,
    "tool_match": 1.0,
    "latency": None,
    "safety": 1.0,
    "cost_delta_pct": 50.0,
    "cost_rise_unbounded": False,
    "latency_delta_pct": None,
    "latency_rise_unbounded": False,
}
ALERT = {
    "dedupe_key": f"{EID}@b/cost",
    "episode_id": EID,
    "dimension": "cost",
    "severity": "critical",
    "message": "cost rose 50.0% over the baseline (threshold 40%)",
}


def reopened() -> EpisodeEvidence:
    """Two instances of one id; records newest first and repeated (at-least-once)."""
    in_record = {**ALERT, "dedupe_key": f"{EID}/cost"}  # how the episode record keys it
    second = episode("b", "2026-01-02T00:00:00.000Z", "failed", scores=SCORES, alerts=[in_record])
    first = episode("a", "2026-01-01T00:00:00.000Z", "passed")
    return EpisodeEvidence(
        EID,
        "here",
        episodes=[second, first, second],
        verdicts=[verdict("b"), verdict("b")],
        alerts=[ALERT],
        signals=[
            signal("a", "harness:start", DAY_1),
            signal("a-2", "tool:call", DAY_1 + 500, parent="a"),
            signal("b", "harness:start", DAY_2),
            signal("b-2", "tool:call", DAY_2 + 250, parent="b"),
            signal("b-2", "tool:call", DAY_2 + 250, parent="b"),  # a redelivery
        ],
    )


def test_each_instance_of_a_reopened_id_is_shown_newest_last() -> None:
    timeline = assemble_timeline(reopened())
    assert [i.key for i in timeline.instances] == [f"{EID}@a", f"{EID}@b"]
    assert [i.status for i in timeline.instances] == ["passed", "failed"]
    assert [[s.signal.id for s in i.signals or ()] for i in timeline.instances] == [
        ["a", "a-2"],
        ["b", "b-2"],
    ]


def test_a_verdict_sits_at_its_deciding_signal_with_the_published_records_fields() -> None:
    newest = assemble_timeline(reopened()).instances[-1]
    assert newest.signals is not None
    tool_call = newest.signals[1]
    assert (tool_call.offset_ms, tool_call.parent_name) == (250.0, "harness:start")
    assert [(v["verdict"], v["early"], v["decided_at_time"]) for v in tool_call.verdicts] == [
        ("fail", True, "2026-01-01T00:00:01.000Z")
    ]
    assert newest.at_close() == []
    text = render_text(assemble_timeline(reopened()))
    lines = text.splitlines()
    at = lines.index("      +0.250s  tool:call  b-2  ← harness:start b")
    assert lines[at + 1].strip() == "FAIL s#0 signal.not (early): forbidden tool:call in b"


def test_scores_with_deltas_and_alerts_are_rendered_once() -> None:
    timeline = assemble_timeline(reopened())
    newest = timeline.instances[-1]
    assert newest.alerts == [ALERT]  # the topic's record and the episode record's: one alert
    text = render_text(timeline)
    assert "scores vs baseline rolling [agent_id=bot]: overall 0.41" in text
    assert "correctness 0.00 · cost 0.50 · tool_match 1.00 · latency n/a · safety 1.00" in text
    assert "cost Δ +50.0% · latency Δ n/a" in text
    assert text.count("ALERT CRITICAL cost: cost rose 50.0% over the baseline") == 1
    as_json = timeline.to_json()
    assert as_json["instances"][1]["scores"]["cost_delta_pct"] == 50.0
    assert as_json["instances"][0]["scores"] is None


def test_verdicts_without_an_episode_record_are_an_open_instance() -> None:
    evidence = EpisodeEvidence(EID, "here", verdicts=[verdict("b")], signals=None)
    [instance] = assemble_timeline(evidence).instances
    assert (instance.key, instance.status, instance.record) == (f"{EID}@b", "open", None)
    assert [v["verdict"] for v in instance.at_close()] == ["fail"]
    assert "no episode record" in render_text(assemble_timeline(evidence))


def test_signals_from_a_window_that_starts_inside_an_instance_join_it() -> None:
    record = episode("b", "2026-01-02T00:00:00.000Z", "failed")
    record["ended_at"] = "2026-01-02T00:00:05.000Z"
    evidence = EpisodeEvidence(
        EID,
        "here",
        episodes=[record],
        signals=[signal("b-2", "tool:call", DAY_2 + 250, parent="b")],  # "b" is older
    )
    [instance] = assemble_timeline(evidence).instances
    assert instance.key == f"{EID}@b"
    assert [s.signal.id for s in instance.signals or ()] == ["b-2"]
    assert instance.signals is not None
    assert instance.signals[0].parent_name is None  # the parent is outside the window
    assert instance.signals[0].offset_ms == 250.0  # from the episode's start
    assert "← ? b" in render_text(assemble_timeline(evidence))
