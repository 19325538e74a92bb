"""Cohen's kappa between two raters (pure, no numpy): unweighted, linear- or quadratic-weighted.

With agreement weights w_ij (1 on the diagonal), cell proportions p_ij of the confusion matrix
and its marginals p_i. (rows, rater A) and p_.j (columns, rater B):

    p_o = sum_ij w_ij p_ij        p_e = sum_ij w_ij p_i. p_.j        kappa = (p_o - p_e) / (1 - p_e)

Weights over k ordered categories (index distance d = |i - j|): unweighted 1 if d == 0 else 0;
linear 1 - d / (k - 1); quadratic 1 - (d / (k - 1))^2. Unweighted suits binary and nominal
scales; quadratic is the usual choice for ordinal scales such as 1-5 (it is close to the
intraclass correlation, and a 1-vs-5 disagreement costs far more than 4-vs-5).

The confidence interval is kappa +- z SE with the large-sample standard error of Fleiss, Cohen
and Everitt (1969), which holds for weighted and unweighted kappa alike:

    var = [sum_ij p_ij (w_ij - (wbar_i. + wbar_.j)(1 - kappa))^2 - (kappa - p_e (1 - kappa))^2]
          / (n (1 - p_e)^2)

with wbar_i. = sum_j p_.j w_ij and wbar_.j = sum_i p_i. w_ij; the interval is clipped to
[-1, 1]. It is an asymptotic interval: with a few dozen items it is a rough guide only.
kappa is undefined (None) without pairs or when p_e == 1 (both raters used one category).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

Weighting = Literal["unweighted", "linear", "quadratic"]
Z_95 = 1.959963984540054


@dataclass(frozen=True)
class Kappa:
    kappa: float | None
    standard_error: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    weighting: Weighting
    observed: float | None  # p_o, weighted agreement
    expected: float | None  # p_e, weighted agreement by chance

    def to_json(self) -> dict[str, object]:
        return {
            "statistic": "cohen_kappa",
            "kappa": self.kappa,
            "weighting": self.weighting,
            "standard_error": self.standard_error,
            "ci_95": None if self.ci_low is None else [self.ci_low, self.ci_high],
            "ci_method": "large-sample SE (Fleiss, Cohen & Everitt 1969)",
            "n": self.n,
            "observed_agreement": self.observed,
            "expected_agreement": self.expected,
        }


def agreement_weights(k: int, weighting: Weighting) -> list[list[float]]:
    if weighting == "unweighted" or k < 2:
        return [[1.0 if i == j else 0.0 for j in range(k)] for i in range(k)]
    power = 1 if weighting == "linear" else 2
    return [[1.0 - (abs(i - j) / (k - 1)) ** power for j in range(k)] for i in range(k)]


def confusion_matrix(
    pairs: Sequence[tuple[Hashable, Hashable]], categories: Sequence[Hashable]
) -> list[list[int]]:
    """Counts: row = the first rater's category, column = the second's, in `categories` order."""
    index = {c: i for i, c in enumerate(categories)}
    matrix = [[0] * len(categories) for _ in categories]
    for a, b in pairs:
        if a not in index or b not in index:
            raise ValueError(f"pair {(a, b)!r} has a value outside the categories {categories!r}")
        matrix[index[a]][index[b]] += 1
    return matrix


def cohen_kappa(
    pairs: Sequence[tuple[Hashable, Hashable]],
    categories: Sequence[Hashable],
    weighting: Weighting = "unweighted",
    z: float = Z_95,
) -> Kappa:
    """kappa over (rater A, rater B) pairs; `categories` in scale order (it matters for
    weighted kappa), including categories neither rater used."""
    n = len(pairs)
    if n == 0:
        return Kappa(None, None, None, None, 0, weighting, None, None)
    counts = confusion_matrix(pairs, categories)
    k = len(categories)
    w = agreement_weights(k, weighting)
    p = [[counts[i][j] / n for j in range(k)] for i in range(k)]
    rows = [sum(p[i]) for i in range(k)]
    cols = [sum(p[i][j] for i in range(k)) for j in range(k)]
    observed = sum(w[i][j] * p[i][j] for i in range(k) for j in range(k))
    expected = sum(w[i][j] * rows[i] * cols[j] for i in range(k) for j in range(k))
    if math.isclose(expected, 1.0):
        return Kappa(None, None, None, None, n, weighting, observed, expected)
    kappa = (observed - expected) / (1.0 - expected)
    row_bar = [sum(cols[j] * w[i][j] for j in range(k)) for i in range(k)]
    col_bar = [sum(rows[i] * w[i][j] for i in range(k)) for j in range(k)]
    spread = sum(
        p[i][j] * (w[i][j] - (row_bar[i] + col_bar[j]) * (1.0 - kappa)) ** 2
        for i in range(k)
        for j in range(k)
    )
    variance = (spread - (kappa - expected * (1.0 - kappa)) ** 2) / (n * (1.0 - expected) ** 2)
    se = math.sqrt(max(variance, 0.0))
    return Kappa(
        kappa,
        se,
        max(-1.0, kappa - z * se),
        min(1.0, kappa + z * se),
        n,
        weighting,
        observed,
        expected,
    )
