"""The regression detector's reference arithmetic computed the fast way gives the bits the
plain way gives: the sorted window is `sorted()` of its values, the robust estimate of
sorted values is the estimate that sorts them, and the bisection that stops once it no
longer moves returns what 200 halvings return."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstream.assertions.alerting.cusum import (
    bernoulli_llr,
    bernoulli_threshold,
    normal_threshold,
    robust_location_scale,
    robust_location_scale_sorted,
)
from evalstream.assertions.alerting.sorted_window import SortedWindow


def bits(values: list[float] | tuple[float, ...]) -> list[str]:
    return [v.hex() for v in values]  # tells -0.0 from 0.0, unlike ==


# Ties, signed zeros, infinities and outliers, as well as ordinary values.
special = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, math.inf, -math.inf, 1e300, -1e300])
finite = st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from([0.0, -0.0, 1.0, 3.0])
no_nan = st.floats(allow_nan=False) | special
log_like = st.floats(-14.0, 12.0, allow_nan=False)  # log costs and latencies


@settings(max_examples=300, deadline=None)
@given(
    maxlen=st.integers(1, 12),
    ops=st.lists(st.one_of(no_nan, st.just(math.nan), st.just("clear")), max_size=80),
)
def test_the_sorted_window_is_the_stable_sort_of_its_values(
    maxlen: int, ops: list[float | str]
) -> None:
    window = SortedWindow(maxlen)
    model: deque[float] = deque(maxlen=maxlen)
    for op in ops:
        if isinstance(op, str):
            window.clear()
            model.clear()
        else:
            window.append(op)
            model.append(op)
        assert bits(list(window)) == bits(list(model))
        assert len(window) == len(model)
        ordered = window.ordered
        if any(math.isnan(v) for v in model):
            assert ordered is None
        else:
            assert ordered is not None
            assert bits(ordered) == bits(sorted(model))


def _same(values: list[float], floor: float) -> None:
    try:
        expected: tuple[float, float] | str = robust_location_scale(values, floor)
    except (ValueError, OverflowError) as exc:
        expected = type(exc).__name__
    try:
        got: tuple[float, float] | str = robust_location_scale_sorted(sorted(values), floor)
    except (ValueError, OverflowError) as exc:
        got = type(exc).__name__
    if isinstance(expected, str) or isinstance(got, str):
        assert got == expected
    else:
        assert bits(got) == bits(expected)


@settings(max_examples=500, deadline=None)
@given(
    values=st.lists(finite | log_like, min_size=1, max_size=60),
    floor=st.sampled_from([0.0, 0.01, 1.0]),
)
def test_the_robust_estimate_of_sorted_values_is_the_one_that_sorts(
    values: list[float], floor: float
) -> None:
    _same(values, floor)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(no_nan, min_size=1, max_size=30), floor=st.sampled_from([0.0, 0.01]))
def test_the_robust_estimate_agrees_with_infinities_and_huge_values(
    values: list[float], floor: float
) -> None:
    _same(values, floor)


@settings(max_examples=200, deadline=None)
@given(
    core=st.lists(st.floats(-1.0, 1.0), min_size=30, max_size=200),
    outliers=st.lists(st.floats(-1e3, 1e3), max_size=10),
)
def test_the_robust_estimate_agrees_on_references_with_outliers(
    core: list[float], outliers: list[float]
) -> None:
    _same(core + outliers, 0.01)


def _bisect_200(target: float, f: Callable[[float], float]) -> float:
    """The threshold solver as it was written first: 200 halvings of [0, 1000]."""
    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return hi


@settings(max_examples=300, deadline=None)
@given(
    q0=st.floats(1e-4, 0.5),
    shift=st.floats(1e-3, 0.5),
    log_arl0=st.floats(0.01, 8.0),
)
def test_the_bernoulli_threshold_is_the_200_step_bisection(
    q0: float, shift: float, log_arl0: float
) -> None:
    q1 = min(q0 + shift, 0.99)
    arl0 = 10.0**log_arl0
    fail, ok = bernoulli_llr(q0, q1)
    drift = -(q0 * fail + (1.0 - q0) * ok)
    expected = _bisect_200(arl0, lambda h: (math.expm1(h) - h) / drift)
    assert bernoulli_threshold(q0, q1, arl0).hex() == expected.hex()


@settings(max_examples=200, deadline=None)
@given(k=st.floats(0.01, 0.7), log_arl0=st.floats(0.01, 8.0))
def test_the_normal_threshold_is_the_200_step_bisection(k: float, log_arl0: float) -> None:
    arl0 = 10.0**log_arl0

    def arl(h: float) -> float:
        a = 2.0 * k * (h + 1.166)
        return (math.expm1(a) - a) / (2.0 * k * k)

    expected = max(0.0, _bisect_200(arl0, arl))
    assert normal_threshold(k, arl0).hex() == expected.hex()
