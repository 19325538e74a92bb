"""`round(x, places)` for scores and deltas, without its decimal conversion when it can.

CPython's `round(x, places)` writes x as a correctly rounded decimal string and reads it
back (dtoa, printf, strtod), three times per scored episode. When x · 10^places is well
away from a tie, the rounded decimal is simply its nearest integer n, and the double
nearest n / 10^places is what IEEE division of two exact operands returns, so
`n / scale` is round's own result. Near a tie, for zero (round keeps the sign of -0.0 and
of tiny negatives) and for huge or non-finite values, round itself decides.
"""

from __future__ import annotations

# The exact powers of ten round() is asked for here (10^22 is the last exact double).
_SCALES = tuple(10.0**places for places in range(23))
# Below 2^45, x * scale is off the exact product by at most 2^-9 (half an ulp), so a
# distance under 3/8 from the nearest integer proves it is the nearest to the exact product.
_LIMIT = 2.0**45
_MARGIN = 0.375
# Adding 1.5 * 2^52 moves |y| < 2^51 where a double's unit is 1, so the sum is rounded to an
# integer (ties to even) and subtracting it again leaves that integer: round(y) in floats,
# without an int object.
_ROUNDER = 1.5 * 2.0**52


def round_places(x: float, places: int) -> float:
    """Exactly `round(x, places)` for 0 <= places <= 22 (see the module docstring)."""
    scale = _SCALES[places]
    y = x * scale
    if -_LIMIT < y < _LIMIT:
        n = (y + _ROUNDER) - _ROUNDER  # the nearest integer, as a float
        if n and -_MARGIN < y - n < _MARGIN:
            return n / scale
    return round(x, places)
