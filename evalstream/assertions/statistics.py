"""Pure statistics for windowed regression detection and dataset runs (no numpy, no scipy).

Conventions:

- `percentile(values, q)` takes q in [0, 100] and interpolates linearly between the closest
  ranks (Hyndman & Fan type 7, NumPy's default): with the sorted values x[0..n-1] and
  h = (n - 1) * q / 100, the result is x[⌊h⌋] + (h - ⌊h⌋) * (x[⌊h⌋ + 1] - x[⌊h⌋]).
- `sample_variance` divides by n - 1 (unbiased); it needs at least two values.
- `wilson_interval` is the Wilson score interval (no continuity correction).
- `newcombe_interval` is Newcombe's hybrid score interval for a difference of two proportions
  (Newcombe 1998, method 10), built from the two Wilson intervals. It is what the regression
  detector uses: it keeps its coverage at small n and at proportions near 0 or 1, where pass
  rates of agents live, and unlike the Wald z-interval never degenerates to a zero width.
  `two_proportion_z_test` (pooled) is provided for p-values in reports.
- `welch_t_test` is Welch's unequal-variances t-test with the Welch-Satterthwaite degrees of
  freedom; the t distribution's CDF comes from the regularised incomplete beta function
  (continued fraction, modified Lentz).
- `bootstrap_quantile_diff_ci` is a percentile bootstrap for the difference of a quantile
  (by default p95) between two samples, resampled with a private `random.Random(seed)`:
  the same inputs and seed always give the same interval.
- `exact_bootstrap_quantile_diff_ci` is the same percentile bootstrap computed exactly,
  without resampling (the exact bootstrap of order statistics, Hutson & Ernst 2000), for
  the quantile taken as one order statistic: x_(k), k = ⌈q / 100 · n⌉ (Hyndman & Fan type 1,
  the inverse of the empirical CDF). The bootstrap distribution of x*_(k) puts probability
  P(Bin(n, j/n) ≥ k) - P(Bin(n, (j-1)/n) ≥ k) on the j-th smallest value (the weights depend
  on n and k only, and are cached); the difference of two independent resamples is the
  convolution of the two. `exact_bootstrap_quantile_rise_p` is P*(x*_cur ≤ x*_base), what
  the lower bound of the interval needs, in one merge of the two samples' supports. Weights
  below 1e-15 in total at either tail are left out.
- pass@k (`pass_at_k`) is the unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al. 2021);
  pass^k is given twice: `pass_power_k_plugin` = (c/n)^k, the plug-in estimate, and
  `pass_power_k_unbiased` = C(c, k) / C(n, k), the unbiased estimate of p^k. Estimators that
  need k draws without replacement (`pass_at_k`, `pass_power_k_unbiased`) are undefined when
  n < k and return None; the plug-in is defined for every n ≥ 1.

Invalid input (an empty sample, c > n, k < 1, a confidence outside (0, 1)) raises
`StatisticsInputError`.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from evalstream.assertions.errors import InputError

_NORMAL = NormalDist()
_BETACF_MAX_ITER = 400
_BETACF_EPS = 1e-15
_TINY = 1e-300


class StatisticsInputError(InputError):
    """A statistic was asked of data it is not defined for."""


@dataclass(frozen=True, slots=True)
class Interval:
    """A confidence interval around a point estimate."""

    low: float
    high: float
    estimate: float

    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0


@dataclass(frozen=True, slots=True)
class TTestResult:
    """Welch's t-test of mean(a) - mean(b); `p_value` is two-sided."""

    t: float
    df: float
    p_value: float
    mean_diff: float


@dataclass(frozen=True, slots=True)
class ZTestResult:
    """Two-proportion z-test of p1 - p2; `p_value` is two-sided."""

    z: float
    p_value: float
    diff: float


# --- descriptive ----------------------------------------------------------------------------


def mean(values: Sequence[float]) -> float:
    if not values:
        raise StatisticsInputError("the mean of an empty sample is undefined")
    return math.fsum(values) / len(values)


def sample_variance(values: Sequence[float]) -> float:
    """Unbiased sample variance (divides by n - 1), computed in two passes for accuracy."""
    n = len(values)
    if n < 2:
        raise StatisticsInputError(f"the sample variance needs at least 2 values, got {n}")
    m = math.fsum(values) / n
    return math.fsum((x - m) * (x - m) for x in values) / (n - 1)


def percentile_sorted(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile (0 ≤ q ≤ 100) of already sorted values, type-7 interpolation."""
    n = len(ordered)
    if n == 0:
        raise StatisticsInputError("the percentile of an empty sample is undefined")
    if not 0.0 <= q <= 100.0:
        raise StatisticsInputError(f"percentile q must be within [0, 100], got {q!r}")
    h = (n - 1) * q / 100.0
    lo = math.floor(h)
    if lo >= n - 1:
        return float(ordered[n - 1])
    frac = h - lo
    low = float(ordered[lo])
    high = float(ordered[lo + 1])
    value = low + frac * (high - low)
    # Rounding must not push the result outside its two neighbours (monotonicity in q).
    return min(max(value, low), high)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 ≤ q ≤ 100) with linear interpolation (see the module doc)."""
    return percentile_sorted(sorted(values), q)


# --- distributions --------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    qab = a + b
    qap = a + 1.0
    qam = a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < _TINY:
        d = _TINY
    d = 1.0 / d
    h = d
    for m in range(1, _BETACF_MAX_ITER + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        if abs(d) < _TINY:
            d = _TINY
        c = 1.0 + aa / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        if abs(d) < _TINY:
            d = _TINY
        c = 1.0 + aa / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _BETACF_EPS:
            break
    return h


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) for a, b > 0 and 0 ≤ x ≤ 1."""
    if a <= 0 or b <= 0:
        raise StatisticsInputError(f"incomplete beta needs a, b > 0, got a={a!r}, b={b!r}")
    if not 0.0 <= x <= 1.0:
        raise StatisticsInputError(f"incomplete beta needs 0 <= x <= 1, got {x!r}")
    if x in {0.0, 1.0}:
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    # The continued fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry
    # I_x(a, b) = 1 - I_{1-x}(b, a) on the other side.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def normal_cdf(x: float) -> float:
    return _NORMAL.cdf(x)


def normal_quantile(p: float) -> float:
    if not 0.0 < p < 1.0:
        raise StatisticsInputError(f"a normal quantile needs 0 < p < 1, got {p!r}")
    return _NORMAL.inv_cdf(p)


def student_t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with `df` > 0 degrees of freedom (df = inf: the normal)."""
    if not df > 0:
        raise StatisticsInputError(f"the t distribution needs df > 0, got {df!r}")
    if math.isnan(t):
        raise StatisticsInputError("t must be a number, got nan")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    if math.isinf(df) or df > 1e10:
        return normal_cdf(t)
    # P(|T| > |t|) = I_{df / (df + t²)}(df / 2, 1 / 2)
    tail = 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def _confidence_z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise StatisticsInputError(f"confidence must be within (0, 1), got {confidence!r}")
    return normal_quantile(0.5 + confidence / 2.0)


def _check_counts(successes: int, n: int) -> None:
    if n < 1:
        raise StatisticsInputError(f"a proportion needs n >= 1 trials, got {n}")
    if not 0 <= successes <= n:
        raise StatisticsInputError(f"successes must be within [0, n={n}], got {successes}")


# --- proportions ----------------------------------------------------------------------------


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval for a binomial proportion (no continuity correction)."""
    _check_counts(successes, n)
    z = _confidence_z(confidence)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n)) / denom
    # Analytically the bounds are exactly 0 at c = 0 and 1 at c = n, and always enclose p;
    # clamp so rounding cannot say otherwise.
    low = 0.0 if successes == 0 else min(p, max(0.0, centre - half))
    high = 1.0 if successes == n else max(p, min(1.0, centre + half))
    return Interval(low, high, p)


def newcombe_interval(
    successes_a: int, n_a: int, successes_b: int, n_b: int, confidence: float = 0.95
) -> Interval:
    """Newcombe's hybrid score interval for p_a - p_b (Newcombe 1998, method 10).

    With the Wilson intervals (l_a, u_a) and (l_b, u_b):
    low  = d - sqrt((p_a - l_a)² + (u_b - p_b)²),
    high = d + sqrt((u_a - p_a)² + (p_b - l_b)²), where d = p_a - p_b.
    """
    wa = wilson_interval(successes_a, n_a, confidence)
    wb = wilson_interval(successes_b, n_b, confidence)
    pa, pb = wa.estimate, wb.estimate
    d = pa - pb
    low = d - math.sqrt((pa - wa.low) ** 2 + (wb.high - pb) ** 2)
    high = d + math.sqrt((wa.high - pa) ** 2 + (pb - wb.low) ** 2)
    return Interval(max(-1.0, low), min(1.0, high), d)


def two_proportion_z_test(successes_a: int, n_a: int, successes_b: int, n_b: int) -> ZTestResult:
    """Pooled two-proportion z-test of p_a - p_b, two-sided.

    When the pooled proportion is 0 or 1 both samples are identical: z = 0, p = 1.
    """
    _check_counts(successes_a, n_a)
    _check_counts(successes_b, n_b)
    pa = successes_a / n_a
    pb = successes_b / n_b
    pooled = (successes_a + successes_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / n_a + 1.0 / n_b))
    if se == 0.0:
        return ZTestResult(0.0, 1.0, pa - pb)
    z = (pa - pb) / se
    return ZTestResult(z, min(1.0, 2.0 * (1.0 - normal_cdf(abs(z)))), pa - pb)


# --- means ----------------------------------------------------------------------------------


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> TTestResult:
    """Welch's t-test of mean(a) - mean(b) (two-sided), each sample with at least 2 values.

    When both samples have zero variance the difference is certain: equal means give t = 0,
    p = 1; different means give t = ±inf, p = 0 (df is then n_a + n_b - 2, for the record).
    """
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        raise StatisticsInputError(f"Welch's t-test needs 2+ values per sample, got {na}, {nb}")
    ma, mb = mean(a), mean(b)
    va, vb = sample_variance(a), sample_variance(b)
    sa, sb = va / na, vb / nb
    se2 = sa + sb
    diff = ma - mb
    if se2 == 0.0:
        if diff == 0.0:
            return TTestResult(0.0, float(na + nb - 2), 1.0, 0.0)
        return TTestResult(math.copysign(math.inf, diff), float(na + nb - 2), 0.0, diff)
    t = diff / math.sqrt(se2)
    df = se2 * se2 / (sa * sa / (na - 1) + sb * sb / (nb - 1))
    p = 2.0 * (1.0 - student_t_cdf(abs(t), df))
    return TTestResult(t, df, min(1.0, max(0.0, p)), diff)


# --- bootstrap ------------------------------------------------------------------------------


def bootstrap_quantile_diff_ci(
    baseline: Sequence[float],
    current: Sequence[float],
    *,
    q: float = 95.0,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Percentile-bootstrap interval of percentile(current, q) - percentile(baseline, q).

    Each resample draws both samples with replacement (sizes kept) from one
    `random.Random(seed)`; the interval is the (1 - confidence) / 2 and (1 + confidence) / 2
    percentiles (type 7) of the resampled differences. Deterministic for a given seed.
    """
    if not baseline or not current:
        raise StatisticsInputError("a bootstrap needs two non-empty samples")
    if resamples < 1:
        raise StatisticsInputError(f"resamples must be >= 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise StatisticsInputError(f"confidence must be within (0, 1), got {confidence!r}")
    rng = random.Random(seed)
    base = list(baseline)
    cur = list(current)
    nb, nc = len(base), len(cur)
    diffs: list[float] = []
    for _ in range(resamples):
        rb = sorted(rng.choices(base, k=nb))
        rc = sorted(rng.choices(cur, k=nc))
        diffs.append(percentile_sorted(rc, q) - percentile_sorted(rb, q))
    diffs.sort()
    alpha = 1.0 - confidence
    estimate = percentile(cur, q) - percentile(base, q)
    return Interval(
        percentile_sorted(diffs, 100.0 * alpha / 2.0),
        percentile_sorted(diffs, 100.0 * (1.0 - alpha / 2.0)),
        estimate,
    )


def order_statistic_rank(n: int, q: float) -> int:
    """k = ⌈q / 100 · n⌉ (at least 1): the 1-based rank of the sample q-quantile (type 1)."""
    if n < 1:
        raise StatisticsInputError("the quantile of an empty sample is undefined")
    if not 0.0 <= q <= 100.0:
        raise StatisticsInputError(f"percentile q must be within [0, 100], got {q!r}")
    return max(1, min(n, math.ceil(q * n / 100.0)))  # q * n first: exact for integral n


_NEGLIGIBLE_MASS = 1e-15


@functools.lru_cache(maxsize=4096)
def bootstrap_order_statistic_weights(n: int, k: int) -> tuple[int, tuple[float, ...]]:
    """The exact bootstrap distribution of the k-th smallest of n resampled values: (start,
    weights), weights[i] the probability that it is the (start + i)-th smallest sample
    value (0-based). P(x*_(k) ≤ x_(j)) = P(Bin(n, j/n) ≥ k) = I_{j/n}(k, n - k + 1).
    Tails holding less than 1e-15 in total are cut off."""
    if not 1 <= k <= n:
        raise StatisticsInputError(f"an order statistic needs 1 <= k <= n, got k={k}, n={n}")
    cdf = [0.0] * (n + 1)  # cdf[j] = P(x*_(k) <= x_(j)), 1-based j; cdf[0] = 0
    for j in range(1, n):
        cdf[j] = regularized_incomplete_beta(float(k), float(n - k + 1), j / n)
    cdf[n] = 1.0
    low = 1
    while cdf[low] < _NEGLIGIBLE_MASS / 2:
        low += 1
    high = n
    while 1.0 - cdf[high - 1] < _NEGLIGIBLE_MASS / 2:
        high -= 1
    weights = tuple(max(0.0, cdf[j] - cdf[j - 1]) for j in range(low, high + 1))
    return low - 1, weights


def _exact_support(ordered: Sequence[float], q: float) -> tuple[int, tuple[float, ...]]:
    n = len(ordered)
    return bootstrap_order_statistic_weights(n, order_statistic_rank(n, q))


def exact_bootstrap_quantile_rise_p(
    baseline_sorted: Sequence[float], current_sorted: Sequence[float], q: float = 95.0
) -> float:
    """P*(x*_cur ≤ x*_base) under the exact bootstrap (see the module doc): the lower bound
    of `exact_bootstrap_quantile_diff_ci` at confidence c is > 0 exactly when this is below
    (1 - c) / 2. Both samples must be sorted ascending. O(support) with cached weights."""
    if not baseline_sorted or not current_sorted:
        raise StatisticsInputError("a bootstrap needs two non-empty samples")
    b_start, b_weights = _exact_support(baseline_sorted, q)
    c_start, c_weights = _exact_support(current_sorted, q)
    # Walk the current support from its largest value down; `tail` accumulates the baseline
    # weight of values >= the current value.
    j = b_start + len(b_weights) - 1
    tail = 0.0
    total = 0.0
    for i in range(len(c_weights) - 1, -1, -1):
        value = current_sorted[c_start + i]
        while j >= b_start and baseline_sorted[j] >= value:
            tail += b_weights[j - b_start]
            j -= 1
        total += c_weights[i] * tail
    return min(1.0, total)


def exact_bootstrap_quantile_diff_ci(
    baseline_sorted: Sequence[float],
    current_sorted: Sequence[float],
    *,
    q: float = 95.0,
    confidence: float = 0.95,
) -> Interval:
    """Exact percentile-bootstrap interval of x_cur(k) - x_base(k) (type-1 q-quantiles): the
    (1 - confidence) / 2 and (1 + confidence) / 2 quantiles (smallest d with P*(D ≤ d) ≥ p)
    of the exact bootstrap distribution of the difference. Both samples sorted ascending."""
    if not baseline_sorted or not current_sorted:
        raise StatisticsInputError("a bootstrap needs two non-empty samples")
    if not 0.0 < confidence < 1.0:
        raise StatisticsInputError(f"confidence must be within (0, 1), got {confidence!r}")
    b_start, b_weights = _exact_support(baseline_sorted, q)
    c_start, c_weights = _exact_support(current_sorted, q)
    pairs = sorted(
        (current_sorted[c_start + i] - baseline_sorted[b_start + j], wc * wb)
        for i, wc in enumerate(c_weights)
        for j, wb in enumerate(b_weights)
    )
    alpha = 1.0 - confidence
    low = high = pairs[-1][0]
    found_low = False
    cumulative = 0.0
    for diff, weight in pairs:
        cumulative += weight
        if not found_low and cumulative >= alpha / 2.0:
            low, found_low = diff, True
        if cumulative >= 1.0 - alpha / 2.0:
            high = diff
            break
    estimate = (
        current_sorted[order_statistic_rank(len(current_sorted), q) - 1]
        - baseline_sorted[order_statistic_rank(len(baseline_sorted), q) - 1]
    )
    return Interval(low, high, estimate)


# --- pass@k and pass^k ----------------------------------------------------------------------


def _check_k(n: int, c: int, k: int) -> None:
    if n < 0:
        raise StatisticsInputError(f"n must be >= 0, got {n}")
    if not 0 <= c <= n:
        raise StatisticsInputError(f"c (correct samples) must be within [0, n={n}], got {c}")
    if k < 1:
        raise StatisticsInputError(f"k must be >= 1, got {k}")


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k = 1 - C(n - c, k) / C(n, k): the chance that at least one of k samples
    drawn without replacement from n trials (c of them correct) is correct. None when n < k."""
    _check_k(n, c, k)
    if n < k:
        return None
    if n - c < k:
        return 1.0
    # Exact integer binomials; int / int division rounds correctly even for huge values.
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_power_k_plugin(n: int, c: int, k: int) -> float | None:
    """pass^k by plug-in, (c / n)^k: the chance that k independent trials all pass, with the
    pass rate estimated by c / n. Biased upward for small n; defined for n ≥ 1 (None at n = 0)."""
    _check_k(n, c, k)
    if n == 0:
        return None
    return (c / n) ** k


def pass_power_k_unbiased(n: int, c: int, k: int) -> float | None:
    """Unbiased pass^k = C(c, k) / C(n, k): the chance that k trials drawn without replacement
    from the n all passed. None when n < k."""
    _check_k(n, c, k)
    if n < k:
        return None
    return math.comb(c, k) / math.comb(n, k)
