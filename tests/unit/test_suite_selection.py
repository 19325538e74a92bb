"""Suite selection waits for the attributes that decide it, whichever signal carries them."""

from __future__ import annotations

from typing import Any

from evalstream.assertions.evaluation.assembly import CloseReason, CloseRules, EpisodeAssembler
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.evaluation.verdicts import Verdict
from evalstream.assertions.suite_format.suites import Suite, SuiteSet, parse_suite
from evalstream.assertions.testing import SignalFactory

JSON = Any

SUPPORT = parse_suite(
    {
        "name": "support",
        "match": {"agent_id": "support-*"},
        "defaultAssertions": [
            {"type": "signal.not", "pattern": "error:*"},
            {"type": "tool.called", "name": "search"},
        ],
    },
    "inline",
)
EVERYTHING = parse_suite(
    {"name": "everything", "defaultAssertions": [{"type": "signal.not", "pattern": "error:*"}]},
    "inline",
)
DATASET = parse_suite(
    {
        "name": "dataset",
        "defaultAssertions": [{"type": "signal.not", "pattern": "error:*"}],
        "cases": [{"id": "c1", "assertions": [{"type": "tool.called", "name": "search"}]}],
    },
    "inline",
)


def assembler(*suites: Suite, rules: CloseRules | None = None) -> EpisodeAssembler:
    suite_set = SuiteSet(list(suites))
    return EpisodeAssembler(suite_set.plan_for, rules or CloseRules(), selection=suite_set)


def closed(asm: EpisodeAssembler) -> EpisodeResult:
    [episode] = asm.drain_ready()
    return episode.result()


def test_signals_before_the_agent_id_are_evaluated_once_it_arrives() -> None:
    asm = assembler(SUPPORT)
    f = SignalFactory("trace-1")
    asm.feed(f("span:start", {"name": "POST /chat"}), now=0)
    bad = f("error:api")
    asm.feed(bad, now=1)
    call = f("tool:call", {"name": "search"})
    asm.feed(call, now=2)
    assert asm.drain_early() == []  # nothing is evaluated before the suite is known
    asm.feed(f("agent:activated", attrs={"agent_id": "support-bot"}), now=3)
    # Decided by the kept signals, not by the one that brought the attribute.
    assert [(e.top_index, e.signal.id) for e in asm.drain_early()] == [(0, bad.id), (1, call.id)]
    asm.close("trace-1", CloseReason.ENDED)
    result = closed(asm)
    assert result.suites == ["support"]
    assert [a.verdict for a in result.assertions] == [Verdict.FAIL, Verdict.PASS]
    assert result.signals == 4
    assert result.notes == []


def test_an_episode_without_the_matched_attribute_is_unevaluated_with_the_reason() -> None:
    asm = assembler(SUPPORT, rules=CloseRules(grace_ms=0))
    f = SignalFactory("trace-2")
    asm.feed(f("span:start"), now=0)
    asm.feed(f("harness:end"), now=1)
    result = closed(asm)
    assert result.close_reason == "ended"
    assert result.status == "unevaluated"
    assert result.notes == [
        "no suite matched: agent_id missing on every signal (suite 'support' matches on it)"
    ]
    assert result.to_json()["notes"] == result.notes


def test_a_value_the_match_rules_out_decides_at_once_and_says_so() -> None:
    asm = assembler(SUPPORT, EVERYTHING)
    f = SignalFactory("e")
    asm.feed(f("agent:activated", attrs={"agent_id": "billing"}), now=0)
    asm.feed(f("error:api"), now=1)
    [early] = asm.drain_early()  # `everything` applies, `support` is ruled out: no waiting
    assert early.episode.evaluation.plan.assertions[0].suite == "everything"
    asm.close("e", CloseReason.ENDED)
    assert closed(asm).notes == []

    only_support = assembler(SUPPORT)
    g = SignalFactory("e2")
    only_support.feed(g("agent:activated", attrs={"agent_id": "billing"}), now=0)
    only_support.close("e2", CloseReason.ENDED)
    assert closed(only_support).notes == [
        "no suite matched: suite 'support': agent_id 'billing' is not support-*"
    ]


def test_suites_without_match_or_cases_select_on_the_first_signal() -> None:
    asm = assembler(EVERYTHING)
    f = SignalFactory("e")
    asm.feed(f("error:api"), now=0)
    assert len(asm.drain_early()) == 1


def test_a_suite_with_case_assertions_waits_for_the_case_id() -> None:
    asm = assembler(DATASET)
    f = SignalFactory("e")
    asm.feed(f("tool:call", {"name": "search"}), now=0)
    asm.feed(f("harness:start", attrs={"case_id": "c1"}), now=1)
    asm.close("e", CloseReason.ENDED)
    result = closed(asm)
    assert [(a.type, a.verdict) for a in result.assertions] == [
        ("signal.not", Verdict.PASS),
        ("tool.called", Verdict.PASS),  # the case's: its tool call came before the case id
    ]


def test_the_selection_buffer_bounds_what_an_episode_keeps() -> None:
    asm = assembler(SUPPORT, EVERYTHING, rules=CloseRules(selection_buffer=3))
    f = SignalFactory("e")
    for i in range(3):
        asm.feed(f("span:start", {"i": i}), now=i)
    assert asm.open["e"].awaiting is None  # selected at the bound, with what was seen
    asm.feed(f("agent:activated", attrs={"agent_id": "support-bot"}), now=4)
    asm.close("e", CloseReason.ENDED)
    result = closed(asm)
    assert result.suites == ["everything"]
    assert result.notes == [
        "suite selection made after 3 signals (the selection buffer) without agent_id"
    ]


def test_an_episode_that_times_out_waiting_is_selected_on_what_it_saw() -> None:
    asm = assembler(SUPPORT, rules=CloseRules(inactivity_ms=100))
    f = SignalFactory("e")
    asm.feed(f("tool:call", {"name": "search"}), now=0)
    assert asm.open["e"].awaiting is not None
    asm.sweep(now=200)
    result = closed(asm)
    assert (result.close_reason, result.status) == ("timed_out", "unevaluated")
    assert result.signals == 1
    assert result.notes[0].startswith("no suite matched: agent_id missing on every signal")
