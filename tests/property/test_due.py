"""`EpisodeAssembler.due` skips the scan of every open episode when none can time out or be
truncated yet; what it returns must still be exactly what that scan returns, in open order,
whatever the clocks do (signals with older timestamps, end signals, closes, sweeps)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstream.assertions.evaluation.assembly import (
    CloseReason,
    CloseRules,
    EpisodeAssembler,
    OpenEpisode,
)
from evalstream.assertions.suite_format.suites import SuiteSet
from evalstream.assertions.wire.signals import Signal

EPISODES = [f"e{i}" for i in range(6)]

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("signal"),
            st.sampled_from(EPISODES),
            st.booleans(),  # an end signal
            st.floats(0, 4_000, allow_nan=False),  # how far the clock moves (back too)
            st.booleans(),  # backwards
        ),
        st.tuples(st.just("due"), st.floats(0, 4_000, allow_nan=False)),
        st.tuples(st.just("close"), st.sampled_from(EPISODES)),
        st.tuples(st.just("sweep"), st.floats(0, 4_000, allow_nan=False)),
    ),
    max_size=60,
)


def scanned(asm: EpisodeAssembler, now: float) -> list[tuple[OpenEpisode, CloseReason]]:
    """The plain rule over every open episode, in open order."""
    rules = asm.rules
    out: list[tuple[OpenEpisode, CloseReason]] = []
    for ep in asm.open.values():
        if ep.end_deadline is not None and now >= ep.end_deadline:
            out.append((ep, CloseReason.ENDED))
        elif now - ep.last_seen >= rules.inactivity_ms:
            out.append((ep, CloseReason.TIMED_OUT))
        elif rules.max_duration_ms is not None and now - ep.opened_at >= rules.max_duration_ms:
            out.append((ep, CloseReason.TRUNCATED))
    return out


def _ids(due: list[tuple[OpenEpisode, CloseReason]]) -> list[tuple[str, CloseReason]]:
    return [(ep.episode_id, reason) for ep, reason in due]


@settings(max_examples=400, deadline=None)
@given(
    operations,
    st.sampled_from([0.0, 500.0, 2_000.0]),
    st.sampled_from([700.0, 3_000.0]),
    st.sampled_from([None, 5_000.0]),
)
def test_due_equals_the_scan_of_every_open_episode(
    ops: list[tuple[Any, ...]], grace: float, inactivity: float, max_duration: float | None
) -> None:
    rules = CloseRules(grace_ms=grace, inactivity_ms=inactivity, max_duration_ms=max_duration)
    asm = EpisodeAssembler(SuiteSet([]).plan_for, rules)
    now = 1.7e12  # epoch milliseconds, where rounding is coarse
    n = 0
    for op in ops:
        if op[0] == "signal":
            _, episode, end, step, backwards = op
            now = now - step if backwards else now + step
            n += 1
            name = "harness:end" if end else "tool:call"
            asm.feed(Signal(f"s{n}", episode, name, now), now)
        elif op[0] == "close":
            asm.close(op[1], CloseReason.TIMED_OUT)
        else:
            at = now + op[1]
            assert _ids(asm.due(at)) == _ids(scanned(asm, at))
            if op[0] == "sweep":
                asm.sweep(at)
                now = at
        asm.drain_ready()
        asm.drain_early()
