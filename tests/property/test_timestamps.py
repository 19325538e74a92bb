"""Every RFC 3339 spelling of an instant parses to the same epoch milliseconds, to the bit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalstream.assertions.wire.signals import parse_timestamp

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
moments = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1))


def general(dt: datetime) -> float:
    return ((dt.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)) / 1000.0


@given(moments)
def test_every_spelling_of_an_instant_parses_to_the_same_milliseconds(moment: datetime) -> None:
    ms = moment.replace(microsecond=(moment.microsecond // 1000) * 1000)
    expected = general(ms)
    spellings = [
        ms.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms.microsecond // 1000:03d}Z",
        ms.isoformat(timespec="milliseconds") + "Z",
        ms.replace(tzinfo=UTC).isoformat(timespec="milliseconds"),
        ms.replace(tzinfo=UTC).isoformat(timespec="microseconds"),
        ms.replace(tzinfo=UTC).astimezone(timezone(timedelta(hours=2))).isoformat(),
        ms.replace(tzinfo=UTC).astimezone(timezone(timedelta(hours=-5, minutes=-30))).isoformat(),
    ]
    for text in spellings:
        assert parse_timestamp(text) == expected, text


@given(moments)
def test_microsecond_precision_is_kept(moment: datetime) -> None:
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert parse_timestamp(text) == general(moment)


def test_epoch_milliseconds_pass_through() -> None:
    assert parse_timestamp(1_700_000_000_123) == 1_700_000_000_123.0
    assert parse_timestamp(1.5) == 1.5


def test_a_fraction_of_non_ascii_digits_is_not_a_timestamp() -> None:
    with pytest.raises(ValueError, match="Invalid isoformat string"):
        parse_timestamp("2024-01-01T00:00:00.\u0661\u0662\u0663Z")  # Arabic-Indic digits
