"""Episode assembly: close rules, duplicates, late signals, reorder window, suite selection."""

from __future__ import annotations

from typing import Any

import pytest

from evalstream.assertions.evaluation.assembly import (
    Accept,
    CloseReason,
    CloseRules,
    EpisodeAssembler,
)
from evalstream.assertions.evaluation.facts import MAX_TOOL_SEQUENCE, EpisodeFacts
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.evaluation.verdicts import Verdict
from evalstream.assertions.suite_format.suites import SuiteSet, parse_suite
from evalstream.assertions.testing import SignalFactory
from evalstream.assertions.wire.pricing import default_pricing
from evalstream.assertions.wire.signals import Signal

SUITE = parse_suite(
    {
        "name": "s",
        "defaultAssertions": [{"type": "signal.not", "pattern": "error:*"}],
        "cases": [
            {"id": "c1", "assertions": [{"type": "tool.called", "name": "Edit"}]},
            {
                "id": "skipped",
                "skip": True,
                "assertions": [{"type": "signal.contains", "pattern": "x"}],
            },
        ],
    },
    "inline",
)


def assembler(rules: CloseRules | None = None, suites: list[Any] | None = None) -> EpisodeAssembler:
    return EpisodeAssembler(SuiteSet(suites or [SUITE]).plan_for, rules or CloseRules())


def results(asm: EpisodeAssembler) -> dict[str, EpisodeResult]:
    return {c.episode.episode_id: c.result() for c in asm.drain_ready()}


def test_end_signal_closes_after_grace_not_before() -> None:
    asm = assembler(CloseRules(grace_ms=1000))
    f = SignalFactory("e1", start_ms=0)
    asm.feed(f("harness:start"), now=0)
    asm.feed(f("harness:end"), now=10)
    asm.sweep(now=500)
    assert not asm.ready
    # A straggler within the grace period still joins the episode.
    assert asm.feed(f("tool:call", {"name": "Edit"}), now=600) is Accept.ACCEPTED
    asm.sweep(now=1010)
    closed = asm.drain_ready()
    assert [c.reason for c in closed] == [CloseReason.ENDED]
    assert closed[0].episode.signals == 3


def test_zero_grace_closes_on_the_end_signal() -> None:
    asm = assembler(CloseRules(grace_ms=0))
    f = SignalFactory("e1")
    asm.feed(f("harness:start"), now=0)
    asm.feed(f("harness:end"), now=1)
    assert [c.reason for c in asm.drain_ready()] == [CloseReason.ENDED]


def test_custom_end_patterns() -> None:
    asm = assembler(CloseRules(end_patterns=("session:*",), grace_ms=0))
    f = SignalFactory("e1")
    asm.feed(f("harness:end"), now=0)
    assert not asm.ready
    asm.feed(f("session:closed"), now=1)
    assert [c.reason for c in asm.drain_ready()] == [CloseReason.ENDED]


def test_inactivity_times_out() -> None:
    asm = assembler(CloseRules(inactivity_ms=100))
    f = SignalFactory("e1")
    asm.feed(f("harness:start"), now=0)
    asm.sweep(now=99)
    assert not asm.ready
    asm.sweep(now=100)
    assert [c.reason for c in asm.drain_ready()] == [CloseReason.TIMED_OUT]


def test_max_signals_and_max_duration_truncate() -> None:
    asm = assembler(CloseRules(max_signals=3))
    f = SignalFactory("e1")
    for i in range(3):
        asm.feed(f("text:delta"), now=i)
    assert [c.reason for c in asm.drain_ready()] == [CloseReason.TRUNCATED]

    asm = assembler(CloseRules(max_duration_ms=50, inactivity_ms=1000))
    g = SignalFactory("e2")
    asm.feed(g("text:delta"), now=0)
    asm.feed(g("text:delta"), now=40)
    asm.sweep(now=50)
    assert [c.reason for c in asm.drain_ready()] == [CloseReason.TRUNCATED]


def test_flush_reports_end_of_input_unless_ended() -> None:
    asm = assembler()
    f, g = SignalFactory("open"), SignalFactory("ended")
    asm.feed(f("harness:start"), now=0)
    asm.feed(g("harness:end"), now=0)
    asm.flush()
    got = {c.episode.episode_id: c.reason for c in asm.drain_ready()}
    assert got == {"open": CloseReason.END_OF_INPUT, "ended": CloseReason.ENDED}


def test_duplicates_are_dropped_and_counted() -> None:
    asm = assembler()
    f = SignalFactory("e1")
    call = f("tool:call", {"name": "Edit"})
    assert asm.feed(call, now=0) is Accept.ACCEPTED
    assert asm.feed(call, now=1) is Accept.DUPLICATE
    asm.flush()
    [result] = results(asm).values()
    assert (result.signals, result.duplicates) == (1, 1)
    assert asm.duplicates == 1


def test_dedupe_window_is_bounded() -> None:
    asm = assembler(CloseRules(dedupe_window=2))
    f = SignalFactory("e1")
    first = f("text:delta")
    asm.feed(first, now=0)
    asm.feed(f("text:delta"), now=1)
    asm.feed(f("text:delta"), now=2)
    # `first` fell out of the two-signal window: accepted again (the documented bound).
    assert asm.feed(first, now=3) is Accept.ACCEPTED
    assert len(asm._recent) == 2


def test_the_same_id_in_two_episodes_is_not_a_duplicate() -> None:
    asm = assembler()
    a = Signal(id="same", episode_id="a", name="text:delta", ts=0)
    b = Signal(id="same", episode_id="b", name="text:delta", ts=0)
    assert asm.feed(a, now=0) is Accept.ACCEPTED
    assert asm.feed(b, now=0) is Accept.ACCEPTED


def test_late_signal_after_close_is_rejected_not_merged() -> None:
    asm = assembler(CloseRules(grace_ms=0))
    f = SignalFactory("e1")
    asm.feed(f("harness:end"), now=0)
    asm.drain_ready()
    assert asm.feed(f("tool:call", {"name": "Edit"}), now=1) is Accept.LATE
    assert asm.late == 1
    assert "e1" not in asm.open


def test_reorder_window_sorts_by_timestamp_then_seq() -> None:
    suite = parse_suite(
        {
            "name": "order",
            "defaultAssertions": [
                {"type": "signal.trajectory", "patterns": ["a", "b", "c"], "strict": True}
            ],
        },
        "inline",
    )
    asm = assembler(CloseRules(reorder_ms=100), [suite])
    sigs = [
        Signal(id="1", episode_id="e", name="a", ts=0, seq=0),
        Signal(id="3", episode_id="e", name="c", ts=20, seq=2),
        Signal(id="2", episode_id="e", name="b", ts=10, seq=1),
    ]
    for s in sigs:
        asm.feed(s, now=s.ts)
    asm.flush()
    [result] = results(asm).values()
    assert result.assertions[0].verdict is Verdict.PASS

    plain = assembler(CloseRules(), [suite])
    for s in sigs:
        plain.feed(s, now=s.ts)
    plain.flush()
    [arrival] = results(plain).values()
    assert arrival.assertions[0].verdict is Verdict.FAIL


def test_case_selection_and_attrs_merge() -> None:
    asm = assembler()
    f = SignalFactory("e1")
    asm.feed(f("harness:start", attrs={"case_id": "c1", "agent_id": "a"}), now=0)
    asm.feed(f("tool:call", {"name": "Edit"}, attrs={"variant": "v2"}), now=1)
    asm.flush()
    [result] = results(asm).values()
    assert [a.type for a in result.assertions] == ["signal.not", "tool.called"]
    assert result.attrs == {"case_id": "c1", "agent_id": "a", "variant": "v2"}
    assert result.passed is True


def test_skipped_case_and_unknown_case_apply_defaults_only() -> None:
    for case_id in ("skipped", "nope"):
        asm = assembler()
        f = SignalFactory(case_id)
        asm.feed(f("harness:start", attrs={"case_id": case_id}), now=0)
        asm.flush()
        [result] = results(asm).values()
        assert [a.type for a in result.assertions] == ["signal.not"]


def test_match_and_sample_select_suites() -> None:
    only_agent_a = parse_suite(
        {
            "name": "a-only",
            "match": {"agent_id": "a*"},
            "defaultAssertions": [{"type": "signal.contains", "pattern": "x"}],
        },
        "inline",
    )
    sampled = parse_suite(
        {
            "name": "half",
            "sample": 0.5,
            "defaultAssertions": [{"type": "signal.contains", "pattern": "y"}],
        },
        "inline",
    )
    suites = SuiteSet([only_agent_a, sampled])
    assert (
        suites.selection("e", {"agent_id": "bob"}) == ()
        or suites.selection("e", {"agent_id": "bob"})[0][0] == 1
    )
    assert any(i == 0 for i, _ in suites.selection("e", {"agent_id": "alice"}))
    picked = sum(1 for i in range(2000) if any(s == 1 for s, _ in suites.selection(f"e{i}", {})))
    assert 850 < picked < 1150  # deterministic hash sampling near the configured rate
    assert suites.selection("e7", {}) == suites.selection("e7", {})


def test_unevaluated_episode_is_neither_passed_nor_failed() -> None:
    asm = assembler(
        suites=[
            parse_suite(
                {
                    "name": "m",
                    "match": {"agent_id": "zzz"},
                    "defaultAssertions": [{"type": "signal.contains", "pattern": "x"}],
                },
                "inline",
            )
        ]
    )
    f = SignalFactory("e")
    asm.feed(f("harness:start"), now=0)
    asm.flush()
    [result] = results(asm).values()
    assert result.passed is None
    assert result.status == "unevaluated"


@pytest.mark.parametrize(
    ("field", "value"),
    [("grace_ms", -1), ("inactivity_ms", 0), ("dedupe_window", 0), ("reorder_ms", -5)],
)
def test_close_rules_validate(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        CloseRules(**{field: value})  # type: ignore[arg-type]  # one field, by name


def test_early_verdicts_are_reported_with_the_deciding_signal() -> None:
    asm = assembler()
    f = SignalFactory("e1")
    asm.feed(f("harness:start", attrs={"case_id": "c1"}), now=0)
    bad = f("error:api")
    asm.feed(bad, now=1)
    [early] = asm.drain_early()
    assert (early.top_index, early.signal.id) == (0, bad.id)
    assert early.episode.evaluation.results()[0].verdict is Verdict.FAIL


def test_tool_sequence_is_kept_in_order_and_capped() -> None:
    facts = EpisodeFacts(default_pricing())
    f = SignalFactory()
    names = ["Read", "Edit", "Bash"]
    for i in range(MAX_TOOL_SEQUENCE + 10):
        facts.observe(f("tool:call", {"name": names[i % 3]}))
    assert facts.tool_calls == MAX_TOOL_SEQUENCE + 10  # the count is exact
    assert facts.tool_names()[:4] == ["Read", "Edit", "Bash", "Read"]
    assert len(facts.tool_names()) == MAX_TOOL_SEQUENCE  # the sequence is bounded
