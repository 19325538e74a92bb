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
