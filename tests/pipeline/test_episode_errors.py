"""One episode that cannot be evaluated or reported is that episode's `error`; every other
episode is reported exactly as without it (check, the pipeline of `up` and the worker)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from evalstream.assertions.suite_format.suites import Suite, parse_suite
from evalstream.assertions.suite_format.yaml_positions import load_yaml
from evalstream.assertions.wire.signals import Signal
from evalstream.stream.offline import evaluate_signals
from evalstream.stream.pipeline import EPISODES, MemorySink, Pipeline
from evalstream.stream.telemetry.metrics import PipelineMetrics

SUITE = """name: tiny
defaultAssertions:
  - type: signal.not
    pattern: "error:*"
cases:
  - id: c
    input: {}
    assertions:
      - type: tool.called
        name: Edit
"""
T0 = 1_767_225_600_000.0


def suite() -> Suite:
    data, positions = load_yaml(SUITE, "tiny.yaml")
    return parse_suite(data, "tiny.yaml", positions)


def episode(eid: str, t0: float, **poison: Any) -> list[Signal]:
    """start, a tool call (or the poison signal), end."""
    middle = Signal(f"{eid}-2", eid, "tool:call", t0 + 100, payload={"name": "Edit"})
    if poison:
        middle = Signal(f"{eid}-2", eid, poison.get("name", "tool:call"), **poison["fields"])
    return [
        Signal(f"{eid}-1", eid, "harness:start", t0, attrs={"case_id": "c"}),
        middle,
        Signal(f"{eid}-3", eid, "harness:end", t0 + 200),
    ]


GOOD = episode("good1", T0) + episode("good2", T0 + 1000)
# Built directly, past the decoder's limits: what a codec bug or a Python caller could make.
POISONS: dict[str, dict[str, Any]] = {
    "timestamp 1e308 (report fails)": {"fields": {"ts": 1e308, "payload": {"name": "Edit"}}},
    "timestamp -1e308 (report fails)": {"fields": {"ts": -1e308, "payload": {"name": "Edit"}}},
    "infinite tokens (evaluation fails)": {
        "name": "provider:end",
        "fields": {"ts": T0 + 600, "payload": {"usage": {"inputTokens": float("inf")}}},
    },
}


def mixed(poison: dict[str, Any]) -> list[Signal]:
    return episode("good1", T0) + episode("bad", T0 + 500, **poison) + episode("good2", T0 + 1000)


@pytest.mark.parametrize("poison", POISONS.values(), ids=list(POISONS))
def test_check_reports_the_poisoned_episode_as_error_and_the_others_unchanged(
    poison: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    alone = {r.episode_id: r.to_json() for r in evaluate_signals(GOOD, [suite()]).results}
    with caplog.at_level(logging.ERROR):
        report = evaluate_signals(mixed(poison), [suite()])
    by_id = {r.episode_id: r.to_json() for r in report.results}
    assert by_id.pop("bad")["status"] == "error"
    assert by_id == alone
    assert sum("'bad'" in m for m in caplog.messages) == 1  # logged once
    assert report.summary.errors == 1


def run_pipeline(signals: list[Signal]) -> tuple[dict[str, dict[str, Any]], PipelineMetrics]:
    sink = MemorySink()
    metrics = PipelineMetrics(process=False)
    # A live pipeline (wall clock, here fixed): every signal reaches its episode.
    pipeline = Pipeline([suite()], sink, metrics=metrics, clock=lambda: T0)

    async def scenario() -> None:
        for sig in signals:
            await pipeline.handle_signal(sig)
        await pipeline.drain()

    asyncio.run(scenario())
    return dict(sink.records[EPISODES]), metrics


@pytest.mark.parametrize("poison", POISONS.values(), ids=list(POISONS))
def test_the_pipeline_reports_the_poisoned_episode_as_error_and_goes_on(
    poison: dict[str, Any],
) -> None:
    alone, _ = run_pipeline(GOOD)
    records, metrics = run_pipeline(mixed(poison))
    bad = records.pop("bad")
    assert bad["status"] == "error"
    assert bad["passed"] is False
    assert bad["error"]
    assert records == alone
    errors = sum(
        metrics.registry.get_sample_value("evalstream_episode_errors_total", {"stage": s}) or 0
        for s in ("evaluate", "report")
    )
    assert errors == 1


def test_an_error_episode_closes_at_once_and_its_later_signals_are_late() -> None:
    poison = POISONS["infinite tokens (evaluation fails)"]
    records, metrics = run_pipeline(mixed(poison))
    assert records["bad"]["close_reason"] == "error"
    assert records["bad"]["signals"] == 2  # harness:end came after the close
    assert metrics.registry.get_sample_value("evalstream_late_signals_total") == 1
    stage = {"stage": "evaluate"}
    assert metrics.registry.get_sample_value("evalstream_episode_errors_total", stage) == 1
