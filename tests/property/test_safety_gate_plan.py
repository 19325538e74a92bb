"""The shared gate plan decides exactly like testing each detector's gates on their own."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstream.assertions.scores.safety import (
    DEFAULT_DETECTORS,
    SafetyConfig,
    output_shape,
    safety_score,
)
from evalstream.assertions.scores.safety_gates import LOWERED, OUTPUT, SHAPE, GatePlan, Group

# A small alphabet, so literals often contain one another and share prefixes.
literals = st.text(alphabet="ab0", min_size=1, max_size=4)
groups = st.tuples(
    st.sampled_from([OUTPUT, LOWERED, SHAPE]), st.lists(literals, min_size=1, max_size=2)
).map(lambda g: (g[0], tuple(g[1])))
gates = st.lists(st.lists(groups, max_size=3), min_size=1, max_size=8)
texts = st.text(alphabet="aAb0_", max_size=24)


def each_on_its_own(
    gates: list[list[Group]], haystacks: tuple[str, str | None, str | None]
) -> list[int]:
    def holds(group: Group) -> bool:
        text = haystacks[group[0]]
        return text is None or any(literal in text for literal in group[1])

    return [i for i, groups in enumerate(gates) if all(holds(g) for g in groups)]


@settings(max_examples=400, deadline=None)
@given(gates, st.data())
def test_the_plan_decides_like_each_gate_on_its_own(
    gates: list[list[Group]], data: st.DataObject
) -> None:
    check_plan(gates, data.draw)


def check_plan(gates: list[list[Group]], draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
    # Texts made of the gates' own literals and bits of them, so that probes often hit.
    pieces = ["a"] + [
        lit[:cut] for groups in gates for _, lits in groups for lit in lits for cut in (1, 9)
    ]
    text = st.lists(st.sampled_from(pieces) | texts, max_size=6).map("".join)
    output, lowered, shape = draw(text), draw(text), draw(text)
    haystacks = (output, lowered, None if draw(st.booleans()) else shape)
    plan = GatePlan.build(gates)
    assert plan.candidates(haystacks) == each_on_its_own(gates, haystacks)


def test_a_synthetic_prefix_probe_never_hides_a_member() -> None:
    # `ab0` and `aba` share the probe `ab`: present, it must lead to both.
    gates: list[list[Group]] = [
        [(OUTPUT, ("ab0",))],
        [(OUTPUT, ("aba",))],
        [(OUTPUT, ("b",)), (SHAPE, ("0",))],
    ]
    plan = GatePlan.build(gates)
    assert [literal for _, literal, _, _ in plan.probes] == ["ab", "0"]
    for text in ("ab0", "aba", "xaba ab0", "ab", "b", ""):
        for shape in ("0", "", None):
            haystacks = (text, None, shape)
            assert plan.candidates(haystacks) == each_on_its_own(gates, haystacks)


def test_the_default_detectors_share_their_top_level_scans() -> None:
    plan = SafetyConfig()._gates
    tops = sorted((haystack, literal) for haystack, literal, _, _ in plan.probes)
    assert tops == [
        (OUTPUT, "://"),
        (OUTPUT, "@"),
        (OUTPUT, "evs_"),
        (OUTPUT, "eyJ"),
        (OUTPUT, "sk-"),
        (OUTPUT, "xox"),
        (LOWERED, "authorization"),
        (LOWERED, "bearer"),
        (SHAPE, "000000000"),
        (SHAPE, "AA"),  # a synthetic probe: the prefix of AA00, AAAA and AAaa
        (SHAPE, "_"),
    ]
    # Gated by any of several literals: the AWS secret key's context words, and the stems of
    # secret names before an assignment.
    names = [SafetyConfig().detectors[i].name for i in plan.ungated]
    assert names == ["aws_secret_access_key", "secret_assignment"]


FRAGMENTS = [
    "the refund ",
    "sk-ant-api03-" + "k" * 30,
    "sk-proj-" + "p" * 30,
    " AKIAIOSFODNN7EXAMPLE ",
    "AIza" + "B" * 35,
    " ghp_" + "a" * 36,
    "xoxb-1234567890-abc",
    "-----BEGIN RSA PRIVATE KEY-----",
    "mail jo@example.org ",
    "4111 1111 1111 1111",
    " 123-45-6789 ",
    "GB82 WEST 1234 5698 7654 32",
    " 2026-01-11 ",
    "#12345 ",
    "I AM ",
    "_",
    "-",
    "é",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join))
def test_default_detectors_find_the_same_as_their_own_gates(text: str) -> None:
    # Detector.hits applies each detector's own gates, one detector at a time.
    expected = tuple(d.name for d in DEFAULT_DETECTORS if d.hits(text))
    assert safety_score({}, 0, text).detector_hits == expected
    ungated = SafetyConfig(
        detectors=tuple(dataclasses.replace(d, requires=(), shape=()) for d in DEFAULT_DETECTORS)
    )
    assert safety_score({}, 0, text, ungated).detector_hits == expected
    if text.isascii():
        assert output_shape(text) is not None
