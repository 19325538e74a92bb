"""Fast paths of the per-signal code equal the plain formulas they replace."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from assertions.matchers import is_number
from assertions.results import iso_ms

YEAR_2100_MS = 4_102_444_800_000


def iso_ms_plain(ts: float) -> str:
    moment = datetime.fromtimestamp(ts / 1000.0, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@given(
    st.one_of(
        st.floats(min_value=0, max_value=YEAR_2100_MS + 10**9, allow_nan=False),
        st.integers(min_value=0, max_value=YEAR_2100_MS + 10**9),
        # exactly between two microseconds or milliseconds: datetime rounds half to even
        st.integers(0, 4 * 10**12).map(lambda ms: ms + 0.0005),
        st.integers(0, 4 * 10**12).map(lambda ms: ms + 0.9995),
        st.integers(0, 4 * 10**9).map(lambda s: s * 1000 + 999.9999),
    )
)
def test_iso_ms_equals_datetime_formatting(ts: float) -> None:
    assert iso_ms(ts) == iso_ms_plain(ts)


def test_iso_ms_outside_the_cached_range_is_datetime_formatting() -> None:
    assert iso_ms(None) is None
    for ts in (-1.5, -86_400_000.0, float(YEAR_2100_MS), 2.5e14):
        assert iso_ms(ts) == iso_ms_plain(ts)


class Flag(enum.IntEnum):
    ONE = 1


class MyFloat(float):
    pass


@given(
    st.one_of(
        st.integers(),
        st.floats(),
        st.booleans(),
        st.none(),
        st.text(max_size=3),
        st.sampled_from([Flag.ONE, MyFloat(2.5), [], {}, b"1"]),
    )
)
def test_is_number_equals_the_isinstance_rule(value: Any) -> None:
    assert is_number(value) == (isinstance(value, int | float) and not isinstance(value, bool))
