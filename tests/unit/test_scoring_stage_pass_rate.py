"""The pass the windowed pass rate observes: the episode's quality outcome, not its cost or
latency alerts (those have windowed metrics of their own); the episode record keeps the
pass including every CRITICAL alert."""

from __future__ import annotations

from evalstream.assertions.alerting.alert_rules import Severity
from evalstream.assertions.evaluation.engine import AssertionOutcome
from evalstream.assertions.evaluation.facts import EpisodeMetrics
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.evaluation.verdicts import Verdict
from evalstream.assertions.scores.baselines import Baseline, BaselineKey, FileBaselines
from evalstream.assertions.scores.stage import ScoringSettings, ScoringStage

ATTRS = {"agent_id": "bot", "case_id": "c1"}


def _stage() -> ScoringStage:
    baseline = Baseline(
        key=BaselineKey.of(ATTRS), source="run:r1", cost_usd=0.10, latency_ms=1000.0
    )
    return ScoringStage(ScoringSettings.load(None), FileBaselines([baseline]))


def _result(
    *, cost_usd: float, verdicts: tuple[Verdict, ...] = (Verdict.PASS,), **attrs: str
) -> EpisodeResult:
    return EpisodeResult(
        episode_id="e1",
        case_id="c1",
        close_reason="ended",
        signals=4,
        duplicates=0,
        assertions=[
            AssertionOutcome(i, "outcome", "suite", f"rule{i}", v, "", None, None)
            for i, v in enumerate(verdicts)
        ],
        metrics=EpisodeMetrics(latency_ms=1000.0, cost_usd=cost_usd, llm_calls=1),
        attrs={**ATTRS, **attrs},
    )


def test_an_episode_failed_only_by_a_critical_cost_alert_is_a_pass_for_the_pass_rate() -> None:
    scored = _stage().score(_result(cost_usd=0.15), [])  # +50 %: over the CRITICAL 40 %
    assert [(a.dimension, a.severity) for a in scored.alerts] == [("cost", Severity.CRITICAL)]
    assert scored.passed is False
    assert scored.record_fields()["passed_with_alerts"] is False
    assert scored.observation.passed is True
    assert scored.observation.values()[0] == 0.0  # the pass-rate slot: not a failure


def test_a_critical_correctness_alert_is_a_failure_for_the_pass_rate() -> None:
    # No assertion applied; the reported outcome `failure` scores correctness 0.
    scored = _stage().score(_result(cost_usd=0.10, verdicts=(), outcome="failure"), [])
    assert ("correctness", Severity.CRITICAL) in [(a.dimension, a.severity) for a in scored.alerts]
    assert not any(a.dimension == "cost" for a in scored.alerts)
    assert scored.passed is False
    assert scored.observation.passed is False
    assert scored.observation.values()[0] == 1.0


def test_failed_assertions_are_a_failure_for_the_pass_rate_without_any_alert() -> None:
    scored = _stage().score(_result(cost_usd=0.10, verdicts=(Verdict.PASS, Verdict.FAIL)), [])
    assert all(a.severity is not Severity.CRITICAL for a in scored.alerts)
    assert scored.passed is False
    assert scored.observation.passed is False
