"""Statistics against textbook values, plus property-tested invariants."""

from __future__ import annotations

import collections
import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstream.assertions.statistics import (
    StatisticsInputError,
    bootstrap_order_statistic_weights,
    bootstrap_quantile_diff_ci,
    exact_bootstrap_quantile_diff_ci,
    exact_bootstrap_quantile_rise_p,
    mean,
    newcombe_interval,
    normal_quantile,
    order_statistic_rank,
    pass_at_k,
    pass_power_k_plugin,
    pass_power_k_unbiased,
    percentile,
    regularized_incomplete_beta,
    sample_variance,
    student_t_cdf,
    two_proportion_z_test,
    welch_t_test,
    wilson_interval,
)

# --- descriptive --------------------------------------------------------------------------


def test_percentile_linear_interpolation() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(1, 101)), 95) == pytest.approx(95.05)
    assert percentile([4, 1, 3, 2], 0) == 1
    assert percentile([4, 1, 3, 2], 100) == 4
    assert percentile([7.0], 95) == 7.0
    assert percentile([10, 20], 25) == 12.5


@pytest.mark.parametrize("q", [-1, 100.5, math.nan])
def test_percentile_rejects_bad_q(q: float) -> None:
    with pytest.raises(StatisticsInputError, match="within"):
        percentile([1, 2], q)


def test_empty_samples_are_errors() -> None:
    with pytest.raises(StatisticsInputError):
        percentile([], 50)
    with pytest.raises(StatisticsInputError):
        mean([])
    with pytest.raises(StatisticsInputError, match="at least 2"):
        sample_variance([1.0])


def test_mean_and_sample_variance() -> None:
    data = [2, 4, 4, 4, 5, 5, 7, 9]
    assert mean(data) == 5.0
    assert sample_variance(data) == pytest.approx(32 / 7)


# --- distributions ------------------------------------------------------------------------


def test_incomplete_beta_closed_forms() -> None:
    for x in (0.0, 0.1, 0.5, 0.93, 1.0):
        assert regularized_incomplete_beta(1, 1, x) == pytest.approx(x)
        assert regularized_incomplete_beta(3, 1, x) == pytest.approx(x**3)
        assert regularized_incomplete_beta(1, 2, x) == pytest.approx(1 - (1 - x) ** 2)
    assert regularized_incomplete_beta(7.5, 7.5, 0.5) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("t", "df", "p"),
    [
        (2.228138852, 10, 0.975),  # textbook quantiles
        (2.015048373, 5, 0.95),
        (63.65674116, 1, 0.995),
        (1.959963985, math.inf, 0.975),
        (1.0, 1, 0.75),  # df = 1 is Cauchy: 1/2 + atan(t)/pi
        (0.0, 7, 0.5),
        (-2.7764451, 4, 0.025),
    ],
)
def test_student_t_cdf_known_values(t: float, df: float, p: float) -> None:
    assert student_t_cdf(t, df) == pytest.approx(p, abs=1e-8)


def test_student_t_cdf_df2_closed_form() -> None:
    for t in (-3.0, -0.5, 0.25, 4.0):
        assert student_t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)))


def test_normal_quantile() -> None:
    assert normal_quantile(0.975) == pytest.approx(1.959963985)
    with pytest.raises(StatisticsInputError):
        normal_quantile(1.0)


# --- proportions --------------------------------------------------------------------------


def test_wilson_interval_newcombe_1998_example() -> None:
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion": 81/263.
    ci = wilson_interval(81, 263)
    assert (ci.low, ci.high) == pytest.approx((0.2553, 0.3662), abs=5e-5)


def test_wilson_interval_at_the_edges() -> None:
    zero = wilson_interval(0, 10)
    assert zero.low == 0.0
    assert zero.high == pytest.approx(0.2775, abs=5e-5)
    full = wilson_interval(10, 10)
    assert full.high == 1.0
    assert full.low == pytest.approx(0.7225, abs=5e-5)


def test_newcombe_interval_newcombe_1998_example() -> None:
    # Newcombe (1998), "Interval estimation for the difference between independent
    # proportions", method 10 on 56/70 - 48/80: 0.0524 to 0.3339.
    ci = newcombe_interval(56, 70, 48, 80)
    assert ci.estimate == pytest.approx(0.2)
    assert (ci.low, ci.high) == pytest.approx((0.0524, 0.3339), abs=5e-5)
    assert ci.excludes_zero()


def test_newcombe_interval_of_equal_rates_includes_zero() -> None:
    assert not newcombe_interval(27, 30, 27, 30).excludes_zero()


def test_two_proportion_z_test() -> None:
    r = two_proportion_z_test(56, 70, 48, 80)
    assert r.z == pytest.approx(2.6502, abs=1e-4)
    assert r.p_value == pytest.approx(0.00805, abs=1e-5)
    same = two_proportion_z_test(10, 10, 20, 20)
    assert (same.z, same.p_value) == (0.0, 1.0)


@pytest.mark.parametrize(("c", "n"), [(-1, 10), (11, 10), (0, 0)])
def test_bad_counts(c: int, n: int) -> None:
    with pytest.raises(StatisticsInputError):
        wilson_interval(c, n)


def test_bad_confidence() -> None:
    with pytest.raises(StatisticsInputError, match="confidence"):
        wilson_interval(1, 2, confidence=1.0)


# --- Welch --------------------------------------------------------------------------------

A1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
A2 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]


def test_welch_t_test_textbook_example() -> None:
    # Wikipedia, "Welch's t-test", example 1: t = -2.46, df = 25.0, p = 0.021.
    r = welch_t_test(A1, A2)
    assert r.t == pytest.approx(-2.46, abs=0.005)
    assert r.df == pytest.approx(25.0, abs=0.05)
    assert r.p_value == pytest.approx(0.021, abs=0.0005)


def test_welch_is_antisymmetric() -> None:
    a, b = welch_t_test(A1, A2), welch_t_test(A2, A1)
    assert a.t == pytest.approx(-b.t)
    assert a.p_value == pytest.approx(b.p_value)


def test_welch_with_zero_variance() -> None:
    assert welch_t_test([1.0, 1.0], [1.0, 1.0, 1.0]).p_value == 1.0
    r = welch_t_test([1.0, 1.0], [2.0, 2.0])
    assert r.p_value == 0.0
    assert r.t == -math.inf


def test_welch_needs_two_values_each() -> None:
    with pytest.raises(StatisticsInputError, match="2\\+ values"):
        welch_t_test([1.0], [1.0, 2.0])


# --- bootstrap ----------------------------------------------------------------------------


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    base = [float(i) for i in range(60)]
    cur = [float(i) * 1.3 for i in range(60)]
    one = bootstrap_quantile_diff_ci(base, cur, resamples=300, seed=7)
    two = bootstrap_quantile_diff_ci(base, cur, resamples=300, seed=7)
    assert one == two
    assert one.estimate == pytest.approx(percentile(cur, 95) - percentile(base, 95))


def test_bootstrap_detects_a_clear_shift_and_not_noise() -> None:
    base = [100.0 + (i % 10) for i in range(100)]
    shifted = [200.0 + (i % 10) for i in range(100)]
    ci = bootstrap_quantile_diff_ci(base, shifted, resamples=500)
    assert ci.low > 0
    assert ci.low <= ci.estimate <= ci.high
    same = bootstrap_quantile_diff_ci(base, list(reversed(base)), resamples=500)
    assert not same.excludes_zero()


def test_bootstrap_rejects_bad_input() -> None:
    with pytest.raises(StatisticsInputError):
        bootstrap_quantile_diff_ci([], [1.0])
    with pytest.raises(StatisticsInputError):
        bootstrap_quantile_diff_ci([1.0], [1.0], resamples=0)


# --- exact bootstrap ----------------------------------------------------------------------


def _enumerated_order_statistic(n: int, k: int) -> list[float]:
    """P(x*_(k) = x_(j)) by enumerating all n^n resamples (positions, so ties do not matter)."""
    counts = collections.Counter(
        sorted(draw)[k - 1] for draw in itertools.product(range(n), repeat=n)
    )
    return [counts[j] / n**n for j in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_exact_bootstrap_weights_match_enumerating_every_resample(n: int) -> None:
    for k in range(1, n + 1):
        start, weights = bootstrap_order_statistic_weights(n, k)
        got = [0.0] * start + list(weights) + [0.0] * (n - start - len(weights))
        assert got == pytest.approx(_enumerated_order_statistic(n, k), abs=1e-12)


def test_exact_bootstrap_interval_matches_the_enumerated_distribution() -> None:
    base = [1.0, 2.0, 2.0, 7.0]
    cur = [1.5, 3.0, 4.0, 9.0]
    k = order_statistic_rank(4, 95.0)
    pb = _enumerated_order_statistic(4, k)
    pc = _enumerated_order_statistic(4, k)
    pairs = sorted(
        (c - b, wc * wb)
        for c, wc in zip(cur, pc, strict=True)
        for b, wb in zip(base, pb, strict=True)
    )
    cumulative = list(itertools.accumulate(w for _, w in pairs))
    low = next(d for (d, _), c in zip(pairs, cumulative, strict=True) if c >= 0.025)
    high = next(d for (d, _), c in zip(pairs, cumulative, strict=True) if c >= 0.975)
    ci = exact_bootstrap_quantile_diff_ci(base, cur, confidence=0.95)
    assert (ci.low, ci.high, ci.estimate) == (low, high, 9.0 - 7.0)
    below = sum(w for d, w in pairs if d <= 0)
    assert exact_bootstrap_quantile_rise_p(base, cur) == pytest.approx(below, abs=1e-12)


def test_exact_bootstrap_agrees_with_resampling() -> None:
    rng = random.Random(5)
    base = sorted(rng.lognormvariate(0, 0.3) for _ in range(80))
    cur = sorted(rng.lognormvariate(0.2, 0.3) for _ in range(60))
    k_b, k_c = order_statistic_rank(80, 95.0), order_statistic_rank(60, 95.0)
    draws = 4000
    diffs = sorted(
        sorted(rng.choices(cur, k=60))[k_c - 1] - sorted(rng.choices(base, k=80))[k_b - 1]
        for _ in range(draws)
    )
    p = exact_bootstrap_quantile_rise_p(base, cur)
    assert sum(1 for d in diffs if d <= 0) / draws == pytest.approx(p, abs=0.02)
    ci = exact_bootstrap_quantile_diff_ci(base, cur)
    assert diffs[int(0.025 * draws)] == pytest.approx(ci.low, abs=0.1)
    assert diffs[int(0.975 * draws)] == pytest.approx(ci.high, abs=0.1)


def test_order_statistic_rank() -> None:
    assert order_statistic_rank(100, 95.0) == 95
    assert order_statistic_rank(30, 95.0) == 29
    assert order_statistic_rank(10, 95.0) == 10
    assert order_statistic_rank(5, 0.0) == 1
    with pytest.raises(StatisticsInputError):
        order_statistic_rank(0, 95.0)
    with pytest.raises(StatisticsInputError):
        order_statistic_rank(5, 101.0)


def test_exact_bootstrap_rejects_bad_input() -> None:
    with pytest.raises(StatisticsInputError):
        exact_bootstrap_quantile_rise_p([], [1.0])
    with pytest.raises(StatisticsInputError):
        exact_bootstrap_quantile_diff_ci([1.0], [])
    with pytest.raises(StatisticsInputError):
        exact_bootstrap_quantile_diff_ci([1.0], [1.0], confidence=1.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=40),
    st.lists(st.integers(0, 40), min_size=1, max_size=40),
)
def test_exact_bootstrap_decision_is_the_interval_lower_bound(
    base: list[int], cur: list[int]
) -> None:
    # Integer-valued samples give many ties, where a merge could go wrong.
    b, c = sorted(float(x) for x in base), sorted(float(x) for x in cur)
    p = exact_bootstrap_quantile_rise_p(b, c)
    ci = exact_bootstrap_quantile_diff_ci(b, c, confidence=0.95)
    assert 0.0 <= p <= 1.0
    assert ci.low <= ci.high
    if abs(p - 0.025) > 1e-9:
        assert (p < 0.025) == (ci.low > 0.0)


# --- pass@k, pass^k -----------------------------------------------------------------------


def test_pass_at_k_known_values() -> None:
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - 21 / 45)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 8, 3) == 1.0  # fewer than k failures: some draw must pass
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(200, 13, 100) == pytest.approx(1 - math.comb(187, 100) / math.comb(200, 100))


def test_pass_power_k_two_ways() -> None:
    assert pass_power_k_plugin(10, 3, 2) == pytest.approx(0.09)
    assert pass_power_k_unbiased(10, 3, 2) == pytest.approx(3 / 45)
    assert pass_power_k_unbiased(10, 10, 4) == 1.0
    assert pass_power_k_unbiased(10, 1, 2) == 0.0


def test_undefined_when_n_below_k() -> None:
    assert pass_at_k(2, 1, 3) is None
    assert pass_power_k_unbiased(2, 2, 3) is None
    assert pass_power_k_plugin(2, 2, 3) == 1.0  # the plug-in needs only n >= 1
    assert pass_power_k_plugin(0, 0, 1) is None


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 2, 0), (-1, 0, 1)])
def test_pass_k_rejects_bad_input(n: int, c: int, k: int) -> None:
    with pytest.raises(StatisticsInputError):
        pass_at_k(n, c, k)


# --- invariants ---------------------------------------------------------------------------

floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(st.lists(floats, min_size=1, max_size=50), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_monotone_and_bounded(values: list[float], q1: float, q2: float) -> None:
    lo, hi = sorted((q1, q2))
    assert min(values) <= percentile(values, lo) <= percentile(values, hi) <= max(values)


@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_estimate(cn: tuple[int, int]) -> None:
    c, n = cn
    ci = wilson_interval(c, n)
    assert 0.0 <= ci.low <= c / n <= ci.high <= 1.0


@given(
    st.integers(1, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.integers(1, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
)
def test_newcombe_contains_the_difference_and_flips_sign(
    a: tuple[int, int], b: tuple[int, int]
) -> None:
    ci = newcombe_interval(a[0], a[1], b[0], b[1])
    assert -1.0 <= ci.low <= ci.estimate <= ci.high <= 1.0
    flipped = newcombe_interval(b[0], b[1], a[0], a[1])
    assert flipped.low == pytest.approx(-ci.high)
    assert flipped.high == pytest.approx(-ci.low)


@given(
    st.integers(1, 60).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_pass_k_estimators_are_probabilities_and_agree_at_k_1(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    at = pass_at_k(n, c, k)
    unbiased = pass_power_k_unbiased(n, c, k)
    plugin = pass_power_k_plugin(n, c, k)
    assert at is not None
    assert unbiased is not None
    assert plugin is not None
    for v in (at, unbiased, plugin):
        assert 0.0 <= v <= 1.0
    assert unbiased <= c / n + 1e-12
    assert unbiased <= at + 1e-12
    if k == 1:
        assert at == pytest.approx(c / n)
        assert unbiased == pytest.approx(c / n)
        assert plugin == pytest.approx(c / n)
    if c < n:
        more = pass_at_k(n, c + 1, k)
        assert more is not None
        assert more >= at - 1e-12


@given(
    st.floats(-50, 50, allow_nan=False),
    st.floats(-50, 50, allow_nan=False),
    st.floats(0.5, 500),
)
def test_t_cdf_is_monotone_and_symmetric(t1: float, t2: float, df: float) -> None:
    lo, hi = sorted((t1, t2))
    assert 0.0 <= student_t_cdf(lo, df) <= student_t_cdf(hi, df) + 1e-12 <= 1.0 + 1e-12
    assert student_t_cdf(-t1, df) == pytest.approx(1 - student_t_cdf(t1, df), abs=1e-10)
