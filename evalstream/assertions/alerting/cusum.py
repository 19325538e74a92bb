"""CUSUM building blocks for continuous regression monitoring (pure math, no state).

A one-sided CUSUM accumulates evidence for a shift in one direction:
S_n = max(0, S_{n-1} + x_n - k) for standardized observations x (Page's scheme), or
S_n = max(0, S_{n-1} + llr_n) for a log-likelihood ratio (the Bernoulli scheme); it signals
when S exceeds h. The thresholds here come from closed-form approximations of the in-control
average run length (ARL0, the expected number of observations between two false signals):

- normal observations, reference k (half the shift to detect, in standard deviations):
  Siegmund's ARL0 = (exp(2 k b) - 2 k b - 1) / (2 k^2) with b = h + 1.166;
- a log-likelihood-ratio CUSUM (Bernoulli): ARL0 ≈ (exp(h) - h - 1) / |E0[llr]| (Wald's
  identity; it ignores the overshoot, which only lengthens the run).

Estimating the baseline from a finite reference shortens the real ARL0; the detector's
defaults leave a margin for that, measured on generated traffic by
`bench/scoring_simulation.py` (asserted by tests/unit/test_scoring_simulation.py).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

SIEGMUND_CORRECTION = 1.166  # 2 * 0.583: the overshoot of a normal random walk


def _solve_increasing(f_target: float, lo: float, hi: float, f: _Fn) -> float:
    """Bisection, at most 200 halvings. Each step is a function of (lo, hi) alone, so once a
    step leaves both unchanged (they are adjacent floats, after about 60 steps from
    [0, 1000]) every later one would too: stopping there returns the same bits."""
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if f.at(mid) < f_target:
            if mid == lo:
                break
            lo = mid
        else:
            if mid == hi:
                break
            hi = mid
    return hi


class _Fn:
    """A monotone ARL function of the threshold."""

    def __init__(self, k: float, drift: float, kind: str) -> None:
        self.k = k
        self.drift = drift
        self.kind = kind

    def at(self, h: float) -> float:
        if self.kind == "normal":
            b = h + SIEGMUND_CORRECTION
            a = 2.0 * self.k * b
            return (math.expm1(a) - a) / (2.0 * self.k * self.k)
        return (math.expm1(h) - h) / self.drift


def normal_threshold(k: float, arl0: float) -> float:
    """h for which a normal CUSUM with reference k has the in-control run length `arl0`."""
    if not (k > 0.0 and arl0 > 1.0):
        raise ValueError(f"need k > 0 and arl0 > 1, got k={k}, arl0={arl0}")
    return max(0.0, _solve_increasing(arl0, 0.0, 1000.0, _Fn(k, 0.0, "normal")))


def normal_delay(k: float, h: float, shift: float) -> float:
    """Siegmund's expected detection delay of a shift of `shift` standard deviations."""
    d = shift - k
    b = h + SIEGMUND_CORRECTION
    if abs(d) < 1e-9:
        return b * b
    return (math.exp(-2.0 * d * b) + 2.0 * d * b - 1.0) / (2.0 * d * d)


def bernoulli_llr(q0: float, q1: float) -> tuple[float, float]:
    """(log-likelihood ratio of a failure, of a success) for failure rate q1 against q0."""
    return math.log(q1 / q0), math.log((1.0 - q1) / (1.0 - q0))


def bernoulli_threshold(q0: float, q1: float, arl0: float) -> float:
    """h for a Bernoulli CUSUM of failure rate q0 -> q1 with in-control run length `arl0`."""
    fail, ok = bernoulli_llr(q0, q1)
    drift = -(q0 * fail + (1.0 - q0) * ok)  # -E0[llr] = KL(q0 || q1) > 0
    return _solve_increasing(arl0, 0.0, 1000.0, _Fn(0.0, drift, "llr"))


def median_sorted(ordered: Sequence[float]) -> float:
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def robust_location_scale(values: Sequence[float], floor: float) -> tuple[float, float]:
    """(median, standard deviation of the values within 5 robust sigmas of the median), the
    scale at least `floor`: efficient on clean data, unmoved by a few outliers."""
    ordered = sorted(values)
    center = median_sorted(ordered)
    mad = median_sorted(sorted(abs(v - center) for v in ordered)) * 1.4826
    limit = 5.0 * max(mad, floor)
    kept = [v for v in ordered if abs(v - center) <= limit]
    return _spread(kept, center, floor)


def robust_location_scale_sorted(ordered: Sequence[float], floor: float) -> tuple[float, float]:
    """`robust_location_scale` of values already sorted and free of NaN, to the bit, without
    sorting: the absolute deviations from the median are two sorted runs (below the median,
    above it), so their median is found by binary search, and the values kept are the
    sorted values but for a run at each end."""
    n = len(ordered)
    center = median_sorted(ordered)
    if not math.isfinite(center):  # deviations from it include NaN, which only a sort places
        return robust_location_scale(ordered, floor)
    split = bisect_left(ordered, center)
    half = n // 2
    mad = _kth_deviation(ordered, split, center, half)
    if not n % 2:
        mad = (_kth_deviation(ordered, split, center, half - 1) + mad) / 2.0
    limit = 5.0 * max(mad * 1.4826, floor)
    # A deviation grows away from the median on either side: the values beyond the limit
    # are a run at the start (below the median) and one at the end (above it).
    lo, hi = 0, n
    while lo < hi and abs(ordered[lo] - center) > limit:
        lo += 1
    while hi > lo and abs(ordered[hi - 1] - center) > limit:
        hi -= 1
    return _spread(ordered[lo:hi], center, floor)


def _kth_deviation(ordered: Sequence[float], split: int, center: float, k: int) -> float:
    """The k-th smallest (from 0) of |v - center| over `ordered`, whose values before `split`
    are below `center` and the others not: the deviations below, read from `split`
    downwards, and those above, read upwards, are two sorted runs; the k + 1 smallest of
    both are the first t of one and the first k + 1 - t of the other, t the least with the
    t-th below not less than the (k - t)-th above (binary search)."""

    def below(j: int) -> float:  # the j-th smallest deviation of the values below center
        return abs(ordered[split - 1 - j] - center)

    def above(j: int) -> float:
        return abs(ordered[split + j] - center)

    n_below, n_above = split, len(ordered) - split
    lo, hi = max(0, k + 1 - n_above), min(n_below, k + 1)
    while lo < hi:
        t = (lo + hi) // 2
        if below(t) < above(k - t):
            lo = t + 1
        else:
            hi = t
    if lo == 0:
        return above(k)
    if lo == k + 1:
        return below(k)
    return max(below(lo - 1), above(k - lo))


def _spread(kept: Sequence[float], center: float, floor: float) -> tuple[float, float]:
    n = len(kept)
    if n < 2:
        return center, floor
    mean = math.fsum(kept) / n
    var = math.fsum((v - mean) ** 2 for v in kept) / (n - 1)
    return center, max(math.sqrt(var), floor)


def mean_scale(values: Sequence[float], floor: float) -> tuple[float, float]:
    """(mean, standard deviation at least `floor`) of bounded scores (a median would sit on
    the mode of a discrete score and bias the drift)."""
    n = len(values)
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, max(math.sqrt(var), floor)
