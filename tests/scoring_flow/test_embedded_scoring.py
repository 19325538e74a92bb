"""Scoring in the embedded runtime: scores join episode records; one injected regression is
one alert, which resolves when the traffic recovers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from evalstream.assertions.scores.stage import (
    ScoringSettings,
    ScoringSettingsError,
    load_scoring_settings,
)
from evalstream.assertions.suite_format.suites import load_suite
from evalstream.stream.embedded import run_embedded
from evalstream.stream.telemetry.metrics import PipelineMetrics
from tests.scoring.http_peer import ScriptedServer
from tests.scoring_flow.traffic import PHASES, write


def test_one_injected_latency_regression_is_one_alert_that_resolves(tmp_path: Path) -> None:
    signals, suite, scoring = write(tmp_path)
    metrics = PipelineMetrics(process=False)
    with ScriptedServer([503]) as hook:  # the first delivery fails and is retried
        with scoring.open("a") as f:
            f.write(f"sinks: [{{kind: webhook, name: hook, url: '{hook.url('/alerts')}'}}]\n")
        run = asyncio.run(
            run_embedded(
                [str(signals)],
                [load_suite(suite)],
                scoring=load_scoring_settings(scoring),
                metrics=metrics,
            )
        )
        delivered = [json.loads(r.body)["alert"] for r in hook.requests]
    assert len(run.results) == sum(count for _, count, _ in PHASES)
    regression = [a for a in run.alerts if a["kind"] == "regression"]
    # One alert: fired once, resolved once; in between only updates (a severity change).
    assert {a["alert_key"] for a in regression} == {"support/v1/latency_p95_ms"}, regression
    states = [a["state"] for a in regression]
    assert states[0] == "firing"
    assert states[-1] == "resolved"
    assert set(states[1:-1]) <= {"updated"}
    assert len({a["dedupe_key"] for a in regression}) == len(regression)
    firing, resolved = regression[0], regression[-1]
    assert firing["test"] == "cusum"
    assert firing["statistic"] >= firing["limit"]
    assert firing["change"] > 20.0  # percent
    # It fired during the regressed phase and resolved during the recovered one.
    normal, regressed, _ = (count for _, count, _ in PHASES)
    order = [r.episode_id for r in run.results]
    assert firing["at"] >= _end_of(run, order[normal])
    assert resolved["at"] >= _end_of(run, order[normal + regressed])
    for severity in ("warning", "critical"):
        labels = {
            "severity": severity,
            "dimension": "latency_p95_ms",
            "agent": "support",
            "variant": "v1",
        }
        firing_now = metrics.registry.get_sample_value(
            "evalstream_regression_alerts_firing", labels
        )
        assert firing_now == 0.0  # the series exists from the agent's first episode
    # The webhook got the same lifecycle, the failed first attempt retried.
    assert [a["dedupe_key"] for a in delivered[1:]] == [a["dedupe_key"] for a in regression]
    assert delivered[0]["dedupe_key"] == regression[0]["dedupe_key"]
    assert metrics.registry.get_sample_value(
        "evalstream_alert_sink_failures_total", {"sink": "hook"}
    ) in (None, 0.0)
    # No baseline: no per-episode alerts, every episode passes.
    assert [a for a in run.alerts if a["kind"] == "episode"] == []
    assert run.exit_code() == 0


def _end_of(run: object, episode_id: str) -> float:
    results = run.results  # type: ignore[attr-defined]
    ended = next(r.ended_ts for r in results if r.episode_id == episode_id)
    assert ended is not None
    return float(ended)


def test_scores_and_alerts_join_the_episode_records(tmp_path: Path) -> None:
    """Rolling baselines: the first episodes have none (noted), later ones name theirs; the
    regressed episodes get latency alerts, and a CRITICAL one fails the episode."""
    signals, suite, _ = write(tmp_path)
    scoring = tmp_path / "rolling.yaml"
    scoring.write_text("baselines: {mode: rolling, window: 10, key_attrs: [agent_id]}\n")
    records: list[dict[str, object]] = []

    class Capture:
        async def publish(self, stream: str, key: str, record: dict[str, object]) -> None:
            if stream == "episodes":
                records.append(record)

    from evalstream.assertions.scores.stage import ScoringStage  # noqa: PLC0415
    from evalstream.stream.pipeline import Envelope, Pipeline  # noqa: PLC0415

    settings = load_scoring_settings(scoring)
    pipeline = Pipeline(
        [load_suite(suite)],
        Capture(),
        scoring=ScoringStage(settings, settings.baseline_store()),
        event_time=True,
    )

    async def feed() -> None:
        for line in signals.read_bytes().splitlines():
            await pipeline.handle(Envelope("signals", line))
        await pipeline.drain()

    asyncio.run(feed())
    assert len(records) == 195
    first = records[0]["scores"]
    assert isinstance(first, dict)
    assert first["baseline"] is None
    later = records[20]["scores"]
    assert isinstance(later, dict)
    assert later["baseline"] == "rolling(last 10) [agent_id=support]"
    assert later["latency"] is not None
    # The first regressed episode is ~100 % slower than its baseline: a CRITICAL alert.
    first_regressed = next(r for r in records if "regressed" in str(r["episode_id"]))
    alerts = first_regressed["alerts"]
    assert isinstance(alerts, list)
    assert [(a["dimension"], a["severity"]) for a in alerts] == [("latency", "critical")]
    assert first_regressed["status"] == "passed"
    assert first_regressed["passed_with_alerts"] is False


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bogus: 1\n", "unknown scoring setting(s) bogus"),
        ("baselines: {mode: sometimes}\n", "baselines.mode 'sometimes' is not one of"),
        ("baselines: {mode: file}\n", "baselines.mode file needs baselines.file"),
        ("baselines: {window: 0}\n", "baselines.window must be an integer >= 1"),
        ("alerts: {cost: {warning: 50, critical: 10}}\n", "invalid alert rules"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_bad_scoring_settings_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "scoring.yaml"
    path.write_text(text)
    with pytest.raises(ScoringSettingsError, match=r"scoring\.yaml") as info:
        load_scoring_settings(path)
    assert message in str(info.value)


def test_default_settings_are_seed_002s() -> None:
    settings = ScoringSettings.load(None)
    assert settings.baseline_mode == "rolling"
    assert settings.key_attrs == ("agent_id", "case_id")
    assert settings.alerts.cost.warning == 20.0
