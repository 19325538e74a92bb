"""Fast paths of the per-signal code equal the plain formulas they replace."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalstream.assertions.errors import RegexTimeoutError
from evalstream.assertions.evaluation.bounded_regex import BoundedRegex
from evalstream.assertions.evaluation.engine import AssertionOutcome
from evalstream.assertions.evaluation.matchers import is_number
from evalstream.assertions.evaluation.records import verdict_record
from evalstream.assertions.evaluation.results import iso_ms
from evalstream.assertions.evaluation.verdicts import Verdict

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


@given(
    st.sampled_from(list(Verdict)),
    st.one_of(st.none(), st.floats(0, 4e12)),
    st.booleans(),
    st.dictionaries(st.sampled_from(["case_id", "agent_id", "variant", "x"]), st.text(max_size=3)),
)
def test_verdict_record_is_the_outcome_json_after_the_episode_fields(
    verdict: Verdict, decided_ts: float | None, early: bool, attrs: dict[str, Any]
) -> None:
    outcome = AssertionOutcome(3, "signal.not", "suite", "rule-1", verdict, "msg", "s1", decided_ts)
    record = verdict_record("ep", outcome, attrs, early=early)
    case_id = attrs.get("case_id")
    expected = {
        "dedupe_key": "ep/suite/3/rule-1",
        "episode_id": "ep",
        "case_id": case_id if isinstance(case_id, str) else None,
        "agent_id": attrs.get("agent_id"),
        "variant": attrs.get("variant"),
        "early": early,
        "decided_at_time": iso_ms(decided_ts),
        **outcome.to_json(),
    }
    assert list(record.items()) == list(expected.items())  # the same bytes once serialised
    assert type(record["verdict"]) is str


@given(
    st.sampled_from(["^gh pr merge", "a+b", "(?i)MERGE$", "^$", "x{2,}"]),
    st.lists(st.text(alphabet="abxghpr merGE", max_size=300), min_size=1, max_size=20),
)
def test_a_remembering_regex_answers_like_a_fresh_one(pattern: str, texts: list[str]) -> None:
    memo = BoundedRegex(pattern, memo=True)
    for text in texts * 2:  # the second round comes from the table (short texts)
        assert memo.search(text) == BoundedRegex(pattern).search(text)


def test_a_remembering_regex_still_times_out_and_remembers_no_timeout() -> None:
    evil = BoundedRegex("(a|aa)+b", timeout_s=0.01, memo=True)
    text = "a" * 40
    for _ in range(2):
        with pytest.raises(RegexTimeoutError):
            evil.search(text)
