"""llm.judge through an injected synchronous judge.

Without a judge the verdict is `error`, never `pass`; with no output it fails without asking.
A judge is asked only at close, so `decided_at` is None. Every case also runs the reference
evaluator (with the same judge) and requires the same verdict.
"""

from __future__ import annotations

from typing import Any

import pytest

from evalstream.assertions.evaluation.engine import AssertionOutcome
from evalstream.assertions.evaluation.reference_facts import SyncJudge
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.judge.protocol import JudgeRequest, JudgeVerdict
from evalstream.assertions.kinds.judge import DEFAULT_JUDGE_MODEL
from evalstream.assertions.testing import (
    SignalFactory,
    evaluate_agreeing,
    run_assertions,
    run_reference,
)
from evalstream.assertions.wire.signals import Signal

JSON = Any
SPEC: dict[str, JSON] = {
    "type": "llm.judge",
    "criteria": ["identifies the SQL injection", "proposes a parameterized query"],
    "minScore": 0.7,
}
ANSWER = "Use a parameterized query: the string interpolation allows SQL injection."


def answered(output: str | None = ANSWER) -> list[Signal]:
    f = SignalFactory()
    end: dict[str, JSON] = {"durationMs": 12}
    if output is not None:
        end["output"] = output
    return [f("harness:start"), f("agent:activated", {"agent": "reviewer"}), f("harness:end", end)]


class ScoringJudge:
    """A judge that gives a fixed score and records what it was asked."""

    def __init__(self, score: float) -> None:
        self.score = score
        self.requests: list[JudgeRequest] = []

    def __call__(self, request: JudgeRequest) -> Outcome:
        self.requests.append(request)
        return JudgeVerdict(score=self.score, reasoning="fixed").outcome(request.min_score)


def evaluate(
    spec: dict[str, JSON], signals: list[Signal], judge: SyncJudge | None
) -> AssertionOutcome:
    return evaluate_agreeing(spec, signals, judge=judge)


def test_without_a_judge_the_verdict_is_error_never_pass() -> None:
    outcome = evaluate(SPEC, answered(), judge=None)
    assert (outcome.verdict, outcome.decided_at) == ("error", None)
    assert "no judge" in outcome.message


@pytest.mark.parametrize(
    ("score", "verdict"),
    [
        pytest.param(0.9, "pass", id="above-min-score"),
        pytest.param(0.7, "pass", id="equal-to-min-score"),
        pytest.param(0.69, "fail", id="below-min-score"),
        pytest.param(0.0, "fail", id="zero"),
    ],
)
def test_judge_score_against_min_score(score: float, verdict: str) -> None:
    outcome = evaluate(SPEC, answered(), judge=ScoringJudge(score))
    assert (outcome.verdict, outcome.decided_at) == (verdict, None)
    assert "judge score" in outcome.message


def test_judge_verdict_is_whatever_the_judge_returns() -> None:
    def refuse(request: JudgeRequest) -> Outcome:
        return Outcome.errored("judge unavailable")

    outcome = evaluate(SPEC, answered(), judge=refuse)
    assert (outcome.verdict, outcome.message) == ("error", "judge unavailable")


def test_judge_is_asked_about_the_episode_output() -> None:
    judge = ScoringJudge(1.0)
    outcome = evaluate({**SPEC, "rubric": "5 = both found"}, answered(), judge=judge)
    assert outcome.verdict == "pass"
    request, reference_request = judge.requests  # one from the engine, one from the reference
    assert request == reference_request
    assert request.output == ANSWER
    assert request.criteria == tuple(SPEC["criteria"])
    assert request.min_score == 0.7
    assert request.rubric == "5 = both found"
    assert request.model == DEFAULT_JUDGE_MODEL
    assert request.temperature == 0.0


def test_judge_model_and_temperature_from_the_spec() -> None:
    judge = ScoringJudge(1.0)
    run_assertions(
        [{**SPEC, "model": "claude-haiku-4-5", "temperature": 0.3}], answered(), judge=judge
    )
    [request] = judge.requests
    assert (request.model, request.temperature) == ("claude-haiku-4-5", 0.3)


@pytest.mark.parametrize("judge", [None, ScoringJudge(1.0)], ids=["no-judge", "generous-judge"])
def test_no_output_fails_without_asking(judge: ScoringJudge | None) -> None:
    outcome = evaluate(SPEC, answered(None), judge=judge)
    assert (outcome.verdict, outcome.decided_at) == ("fail", None)
    assert "no output" in outcome.message
    assert judge is None or judge.requests == []


def test_judge_is_not_asked_when_a_sibling_already_decided() -> None:
    judge = ScoringJudge(1.0)
    spec = {
        "type": "all",
        "assertions": [{"type": "signal.not", "pattern": "agent:activated"}, SPEC],
    }
    [outcome] = run_assertions([spec], answered(), judge=judge)
    assert (outcome.verdict, outcome.decided_at) == ("fail", "s2")
    assert judge.requests == []
    [reference] = run_reference([spec], answered(), judge=judge)
    assert reference.verdict == "fail"


@pytest.mark.parametrize(
    ("score", "verdict"),
    [pytest.param(0.9, "fail", id="pass-inverted"), pytest.param(0.1, "pass", id="fail-inverted")],
)
def test_judge_inside_not(score: float, verdict: str) -> None:
    outcome = evaluate({"type": "not", "assertion": SPEC}, answered(), judge=ScoringJudge(score))
    assert (outcome.verdict, outcome.decided_at) == (verdict, None)


def test_no_judge_inside_not_stays_error() -> None:
    outcome = evaluate({"type": "not", "assertion": SPEC}, answered(), judge=None)
    assert outcome.verdict == "error"


def test_each_judge_assertion_gets_its_own_request() -> None:
    judge = ScoringJudge(0.8)
    strict = {**SPEC, "minScore": 0.9}
    outcomes = run_assertions([SPEC, strict], answered(), judge=judge)
    assert [o.verdict for o in outcomes] == ["pass", "fail"]
    assert [r.min_score for r in judge.requests] == [0.7, 0.9]
    references = run_reference([SPEC, strict], answered(), judge=judge)
    assert [r.verdict for r in references] == ["pass", "fail"]
