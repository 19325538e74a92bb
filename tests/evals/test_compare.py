"""compare(): regressions need support, the gate, verdicts; threshold profiles."""

from __future__ import annotations

import pytest

from evalstream.assertions.evalruns.compare import CompareOptions, DatasetMismatchError, compare
from evalstream.assertions.evalruns.fingerprint import dataset_fingerprint
from evalstream.assertions.evalruns.models import SampleStatus
from evalstream.assertions.evalruns.profiles import PROFILES, check_profile
from tests.evals.conftest import make_suite
from tests.evals.factories import run_of

P: SampleStatus = "passed"
F: SampleStatus = "failed"
E: SampleStatus = "error"


def test_single_sample_pass_to_fail_is_a_critical_regression_that_blocks() -> None:
    base = run_of({"a": [P], "b": [P], "c": [F], "d": []})  # d was not selected
    cand = run_of({"a": [F], "b": [P], "c": [P], "d": [P]})
    c = compare(base, cand)
    [reg] = c.regressions
    assert (reg.case_id, reg.type, reg.severity) == ("a", "pass_to_fail", "critical")
    assert "output check fail" in reg.description
    assert [i.case_id for i in c.improvements] == ["c"]
    assert c.unchanged == ["b"]
    assert c.new_cases == ["d"]
    assert c.summary.verdict == "mixed"
    assert c.summary.should_block
    assert c.summary.block_reason
    assert "a (passed in baseline, failed in candidate" in (c.summary.block_reason)


def test_an_error_in_the_candidate_is_a_regression_and_never_a_pass() -> None:
    c = compare(run_of({"a": [P]}), run_of({"a": [E]}))
    assert c.regressions[0].description.startswith("passed in baseline, error in candidate")
    assert c.summary.should_block


def test_removed_cases_block_unless_allowed_and_identical_runs_do_not() -> None:
    base = run_of({"a": [P], "b": [P]})
    cand = run_of({"a": [P], "b": []})  # the candidate left b out
    c = compare(base, cand)
    assert c.removed_cases == ["b"]
    assert c.summary.should_block
    [reason] = c.summary.block_reasons
    assert reason.startswith("1 of the baseline's 2 evaluated case(s) were not evaluated")
    assert "(b)" in reason
    assert "--allow-removed" in reason
    allowed = compare(base, cand, CompareOptions(allow_removed=True))
    assert allowed.removed_cases == ["b"]
    assert not allowed.summary.should_block
    same = compare(base, base)
    assert (same.summary.verdict, same.summary.should_block) == ("equivalent", False)
    assert same.summary.pass_rate_delta == 0


def test_one_unlucky_sample_in_repeated_runs_does_not_block() -> None:
    base = run_of({"a": [P] * 5, "b": [P] * 5})
    cand = run_of({"a": [P, P, F, P, P], "b": [P] * 5})
    c = compare(base, cand)
    assert c.regressions == []
    [note] = c.inconclusive
    assert note.case_id == "a"
    assert "5/5 → 4/5" in note.description
    assert not c.summary.should_block


def test_a_supported_drop_in_repeated_runs_is_a_regression() -> None:
    base = run_of({"a": [P] * 8, "b": [P] * 8})
    cand = run_of({"a": [F] * 7 + [P], "b": [P] * 8})
    c = compare(base, cand)
    [reg] = c.regressions
    assert reg.case_id == "a"
    assert reg.evidence
    assert "8/8 → 1/8" in reg.evidence
    assert "95% CI" in reg.evidence
    assert c.summary.should_block


def test_many_small_drops_block_through_the_pooled_pass_rate() -> None:
    cases = {f"c{i}": [P] * 5 for i in range(10)}
    worse = {f"c{i}": [P, P, P, F, F] for i in range(10)}
    c = compare(run_of(cases), run_of(worse))
    assert c.regressions == []  # no single case has support on its own
    assert c.summary.should_block
    assert "fell significantly" in (c.summary.block_reason or "")


def test_metric_degradation_is_a_warning_that_blocks_only_on_warning() -> None:
    base = run_of({"a": [P]}, cost=0.010, latency=1000)
    cand = run_of({"a": [P]}, cost=0.020, latency=1020)
    c = compare(base, cand)
    [reg] = c.regressions
    assert (reg.type, reg.severity) == ("metric_degraded", "warning")
    assert "cost" in reg.description
    assert "+100.0 %" in reg.description
    assert c.summary.verdict == "worse"
    assert not c.summary.should_block
    strict = compare(base, cand, CompareOptions(fail_on="warning"))
    assert strict.summary.should_block


def test_latency_jitter_below_the_floor_is_not_a_regression() -> None:
    c = compare(run_of({"a": [P]}, latency=2.0), run_of({"a": [P]}, latency=4.0))
    assert c.regressions == []
    assert c.summary.verdict == "equivalent"


def test_comparison_round_trips_through_json() -> None:
    c = compare(run_of({"a": [P]}), run_of({"a": [F]}))
    again = type(c).model_validate(c.to_json())
    assert again == c


def test_profiles_match_seed_000_and_check_both_pass_hat_k() -> None:
    assert (
        PROFILES["production"].pass_at_1,
        PROFILES["production"].pass_at_k,
        PROFILES["production"].pass_hat_k,
    ) == (0.90, 0.99, 0.80)
    # 3 cases x 5 samples, 14/15 passing: pass@1 = 0.933, pass^3 seed = mean((c/n)^3).
    run = run_of({"a": [P] * 5, "b": [P] * 5, "c": [P, P, P, P, F]}, k=3)
    pm = run.pass_metrics
    assert pm.pass_hat_k_seed is not None
    assert pm.pass_hat_k_unbiased is not None
    assert abs(pm.pass_hat_k_seed - (1 + 1 + 0.8**3) / 3) < 1e-12
    assert abs(pm.pass_hat_k_unbiased - (1 + 1 + 4 / 10) / 3) < 1e-12
    seed = check_profile(run, PROFILES["production"])
    assert [r.status for r in seed.rows] == ["pass", "pass", "pass"]
    unbiased = check_profile(run, PROFILES["production"], pass_hat="unbiased")
    assert [r.status for r in unbiased.rows] == ["pass", "pass", "fail"]
    assert "unbiased" in unbiased.rows[2].metric
    critical = check_profile(run, PROFILES["critical"])
    assert not critical.passed
    assert "pass@1 0.933 < 0.95" in critical.describe_failures()


def test_undefined_metrics_are_reported_not_failed() -> None:
    check = check_profile(run_of({"a": [P]}), PROFILES["critical"])
    assert [r.status for r in check.rows] == ["pass", "undefined", "pass"]
    assert check.rows[1].note
    assert "fewer than k=3" in check.rows[1].note
    assert check.passed


def test_runs_of_different_datasets_are_refused() -> None:
    base = run_of({f"c{i}": [P] for i in range(10)})
    other = run_of({f"o{i}": [P] if i % 2 else [F] for i in range(25)})
    with pytest.raises(DatasetMismatchError) as caught:
        compare(base, other)
    message = str(caught.value)
    assert "ran different datasets" in message
    assert "cases only in the baseline: c0, c1, c2, c3, c4 (+5 more)" in message
    assert "cases only in the candidate: o0, o1" in message
    renamed = other.model_copy(update={"name": "another"})
    with pytest.raises(DatasetMismatchError, match="dataset 'synthetic' vs 'another'"):
        compare(base, renamed)


def test_the_same_case_ids_with_other_inputs_are_another_dataset() -> None:
    base = run_of({"a": [P], "b": [P]})
    changed = run_of({"a": [P], "b": [P]}).model_copy(
        update={"dataset_fingerprint": "sha256:" + "0" * 64}
    )
    with pytest.raises(DatasetMismatchError, match="the same case ids with other inputs"):
        compare(base, changed)
    # Records of older versions carry no fingerprint: their case ids decide.
    old = changed.model_copy(update={"dataset_fingerprint": None})
    assert not compare(base, old).summary.should_block


def test_the_fingerprint_covers_case_ids_and_inputs_only() -> None:
    one = make_suite([{"id": "a", "input": {"q": 1}}, {"id": "b"}])
    reordered = make_suite([{"id": "b", "tags": ["x"]}, {"id": "a", "input": {"q": 1}}])
    other_input = make_suite([{"id": "a", "input": {"q": 2}}, {"id": "b"}])
    assert dataset_fingerprint(one) == dataset_fingerprint(reordered)
    assert dataset_fingerprint(one) != dataset_fingerprint(other_input)
    assert dataset_fingerprint(one).startswith("sha256:")
