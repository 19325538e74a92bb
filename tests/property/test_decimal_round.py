"""`round_places` returns exactly what `round(x, places)` returns, bit for bit."""

from __future__ import annotations

import math
import struct

from hypothesis import example, given, settings
from hypothesis import strategies as st

from evalstream.assertions.scores.decimal_round import round_places


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)  # tells -0.0 from 0.0, and compares NaN with itself


def _same(x: float, places: int) -> None:
    assert _bits(round_places(x, places)) == _bits(round(x, places)), (x, places)


@settings(max_examples=3000, deadline=None)
@given(x=st.floats(allow_nan=True, allow_infinity=True), places=st.integers(0, 22))
@example(x=-0.0, places=9)
@example(x=-1e-13, places=9)
@example(x=0.0, places=12)
@example(x=2.0**45 / 1e9, places=9)
@example(x=0.125, places=2)
@example(x=2.675, places=2)  # binary 2.67499999... rounds down
def test_any_float(x: float, places: int) -> None:
    _same(x, places)


@settings(max_examples=3000, deadline=None)
@given(
    k=st.integers(-(10**13), 10**13),
    places=st.sampled_from([9, 12]),
    offset=st.sampled_from([0.0, 0.5, -0.5, 0.375, -0.375, 0.4999999, 0.5000001]),
    ulps=st.integers(-3, 3),
)
def test_decimals_near_a_tie_or_a_whole_value(
    k: int, places: int, offset: float, ulps: int
) -> None:
    x = (k + offset) / 10.0**places
    for _ in range(abs(ulps)):
        x = math.nextafter(x, math.copysign(math.inf, ulps))
    _same(x, places)


@settings(max_examples=2000, deadline=None)
@given(
    current=st.floats(0, 1e4, allow_subnormal=False),
    baseline=st.floats(1e-6, 1e4, allow_subnormal=False),
)
def test_deltas_and_scores_as_scoring_computes_them(current: float, baseline: float) -> None:
    _same((current - baseline) / baseline * 100.0, 9)
    _same(current / (current + baseline), 12)
