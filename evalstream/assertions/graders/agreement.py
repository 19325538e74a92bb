"""Inter-rater agreement: Krippendorff's alpha (pure, no numpy).

Why alpha: it takes any number of raters per item, tolerates missing ratings (not every rater
rates every item), and has a distance metric per scale type: `nominal` for binary ratings,
`ordinal` for Likert ratings and ranks, `interval` for numeric scores.

    alpha = 1 - D_o / D_e = 1 - (n - 1) * sum_ck o_ck d(c, k) / sum_ck n_c n_k d(c, k)

with the coincidence matrix o (every ordered pair of values within one unit, weighted
1 / (m_u - 1) where m_u is the unit's number of values), n_c its marginals, n the number of
pairable values, and the squared distance d:

- nominal: 0 if c == k else 1;
- interval: (c - k)^2;
- ordinal: (sum of n_g for g from c to k  -  (n_c + n_k) / 2)^2, over the sorted values.

Units with fewer than two values are not pairable and are left out. alpha is 1 for perfect
agreement, 0 for agreement at chance level, negative for systematic disagreement. It is
undefined (None) when there are no pairable values or every value is the same (no variation:
D_e = 0). Reference: Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011).

`percent_agreement` (share of agreeing rater pairs within one unit) is given per item, where a
single unit leaves alpha no expected disagreement to compare with.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Any, Literal

Metric = Literal["nominal", "ordinal", "interval"]
_Distance = Callable[[object, object], float]


@dataclass(frozen=True)
class Agreement:
    alpha: float | None
    metric: Metric
    units: int  # pairable units (two or more values)
    values: int  # pairable values

    def to_json(self) -> dict[str, object]:
        return {
            "statistic": "krippendorff_alpha",
            "alpha": self.alpha,
            "metric": self.metric,
            "units": self.units,
            "values": self.values,
        }


def krippendorff_alpha(
    units: Mapping[Any, Sequence[float | int | str | bool]], metric: Metric = "nominal"
) -> Agreement:
    """alpha over `units`: unit -> the values its raters gave (missing ratings left out)."""
    coincidences: dict[tuple[object, object], float] = defaultdict(float)
    pairable = 0
    paired_units = 0
    for values in units.values():
        m = len(values)
        if m < 2:
            continue
        paired_units += 1
        pairable += m
        for a, b in permutations(range(m), 2):
            coincidences[(values[a], values[b])] += 1.0 / (m - 1)
    if pairable == 0:
        return Agreement(None, metric, 0, 0)
    marginals: dict[object, float] = defaultdict(float)
    for (c, _), weight in coincidences.items():
        marginals[c] += weight
    categories = sorted(marginals, key=_order_key)
    distance = _distance(metric, categories, marginals)
    n = sum(marginals.values())
    observed = sum(w * distance(c, k) for (c, k), w in coincidences.items())
    expected = sum(
        marginals[c] * marginals[k] * distance(c, k) for c in categories for k in categories
    )
    if expected == 0:
        return Agreement(None, metric, paired_units, pairable)
    return Agreement(1.0 - (n - 1) * observed / expected, metric, paired_units, pairable)


def _order_key(value: object) -> tuple[int, float | str]:
    if isinstance(value, bool):
        return (0, float(value))
    if isinstance(value, int | float):
        return (0, float(value))
    return (1, str(value))


def _distance(
    metric: Metric, categories: list[object], marginals: Mapping[object, float]
) -> _Distance:
    if metric == "nominal":
        return lambda c, k: 0.0 if c == k else 1.0
    if metric == "interval":
        return lambda c, k: (float(c) - float(k)) ** 2  # type: ignore[arg-type]  # numeric by contract
    position = {c: i for i, c in enumerate(categories)}

    def ordinal(c: object, k: object) -> float:
        i, j = sorted((position[c], position[k]))
        between = sum(marginals[categories[g]] for g in range(i, j + 1))
        return (between - (marginals[c] + marginals[k]) / 2.0) ** 2

    return ordinal


def percent_agreement(values: Sequence[object], within: float = 0.0) -> float | None:
    """Share of rater pairs that agree: equal values, or numbers at most `within` apart
    (`within=1` is the "adjacent agreement" usual for Likert rubrics). None with fewer than
    two values."""
    m = len(values)
    if m < 2:
        return None
    agreeing = sum(1 for a, b in permutations(values, 2) if _close(a, b, within))
    return agreeing / (m * (m - 1))


def _close(a: object, b: object, within: float) -> bool:
    if a == b:
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(float(a) - float(b)) <= within
    return False
