"""The regression detector's arithmetic computed the fast way gives the bits the plain way
gives: the bisection that stops once it no longer moves returns what 200 halvings return."""

from __future__ import annotations

import math
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstream.assertions.alerting.cusum import (
    bernoulli_llr,
    bernoulli_threshold,
    normal_threshold,
)


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
