"""Incremental verdict == reference verdict, for every assertion type, on generated streams.

Streams are drawn from a small vocabulary so that patterns, payloads, causal links, tool
calls, state changes and outputs collide often; specs are drawn for every registered type,
including nested all/any/not compositions.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.registry import all_types
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.judge.protocol import JudgeRequest
from evalstream.assertions.testing import parse_all, run_assertions, run_reference
from evalstream.assertions.wire.signals import Signal

AGENTS = ["planner", "coder", "reviewer"]
TOOLS = ["Read", "Edit", "Bash"]
NAMES = [
    "harness:start",
    "harness:end",
    "agent:activated",
    "agent:skipped",
    "agent:error",
    "agent:completed",
    "provider:start",
    "provider:end",
    "provider:error",
    "text:delta",
    "text:complete",
    "tool:call",
    "tool:result",
    "state:plan:changed",
    "state:result:changed",
    "review:complete",
    "plan:complete",
    "error:api",
    "custom:a:b",
]
PATTERNS = [
    "harness:start",
    "harness:end",
    "agent:*",
    "agent:activated",
    "provider:end",
    "text:delta",
    "tool:*",
    "state:**",
    "state:*:changed",
    "review:complete",
    "plan:complete",
    "error:*",
    "custom:**",
    "*:complete",
    "**",
    "nothing:here",
]
WORDS = ["alpha", "beta", "injection", "XSS", "done", ""]
MODELS = ["claude-sonnet-4-5", "claude-haiku-4-5", "mystery-model"]

small_int = st.integers(min_value=0, max_value=4)
scalar = st.one_of(st.sampled_from(WORDS), small_int, st.booleans(), st.none())


def payload_for(name: str) -> st.SearchStrategy[Any]:
    agent = st.sampled_from(AGENTS)
    if name in ("agent:activated", "agent:skipped", "agent:error", "agent:completed"):
        return st.fixed_dictionaries(
            {"agent": agent},
            optional={
                "trigger": st.sampled_from(["review:complete", "plan:complete", "harness:start"]),
                "reason": st.sampled_from(["guard", "budget"]),
            },
        )
    if name == "provider:start":
        return st.fixed_dictionaries({"model": st.sampled_from(MODELS), "provider": st.just("x")})
    if name == "provider:end":
        usage = st.fixed_dictionaries(
            {"inputTokens": st.integers(0, 3000), "outputTokens": st.integers(0, 1500)}
        )
        return st.fixed_dictionaries(
            {"output": st.fixed_dictionaries({"content": st.sampled_from(WORDS), "usage": usage})},
            optional={
                "costUsd": st.sampled_from([0.0, 0.01, 0.2]),
                "model": st.sampled_from(MODELS),
            },
        )
    if name == "tool:call":
        return st.fixed_dictionaries(
            {
                "name": st.sampled_from(TOOLS),
                "input": st.fixed_dictionaries(
                    {"path": st.sampled_from(["a.ts", "b/utils.ts", "c.py"])},
                    optional={"n": small_int},
                ),
            }
        )
    if name.startswith("state:"):
        key = name.split(":")[1]
        value = st.one_of(
            scalar,
            st.fixed_dictionaries(
                {"n": small_int, "tags": st.lists(st.sampled_from(WORDS), max_size=2)}
            ),
        )
        return st.fixed_dictionaries({"key": st.just(key), "newValue": value})
    if name in ("text:complete", "text:delta"):
        return st.fixed_dictionaries({"content": st.sampled_from(WORDS)})
    if name == "harness:end":
        return st.fixed_dictionaries(
            {},
            optional={
                "output": st.sampled_from(WORDS),
                "durationMs": st.integers(0, 5000),
            },
        )
    if name == "harness:start":
        return st.fixed_dictionaries(
            {}, optional={"state": st.fixed_dictionaries({"plan": scalar})}
        )
    return st.one_of(st.none(), st.fixed_dictionaries({"agent": agent, "n": small_int}))


@st.composite
def signal_streams(draw: st.DrawFn) -> list[Signal]:
    n = draw(st.integers(min_value=0, max_value=30))
    # A few names per stream, so that the same names recur and their interplay is exercised.
    vocabulary = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True))
    signals: list[Signal] = []
    ts = 1_000.0
    for i in range(n):
        name = draw(st.sampled_from(vocabulary))
        ts += draw(st.sampled_from([0.0, 5.0, 50.0, -20.0]))
        choice = draw(st.integers(0, 4))
        if choice == 0 or not signals:
            parent = None
        elif choice == 1:
            parent = "missing"
        elif choice == 2:
            parent = f"s{i + 1}"  # a later signal: dangling by the causes-precede rule
        else:
            parent = draw(st.sampled_from(signals)).id
        signals.append(
            Signal(
                id=f"s{i}",
                episode_id="ep",
                name=name,
                ts=ts,
                seq=i,
                agent=draw(st.one_of(st.none(), st.sampled_from(AGENTS))),
                parent=parent,
                payload=draw(payload_for(name)),
            )
        )
    return signals


maybe_payload = st.one_of(
    st.none(),
    st.fixed_dictionaries({"agent": st.sampled_from(AGENTS)}),
    st.fixed_dictionaries({"content": st.sampled_from(["done", {"contains": "a"}])}),
    st.fixed_dictionaries({"n": st.sampled_from([1, {"gte": 2}, {"between": [1, 3]}])}),
)
value_expect = st.one_of(
    scalar,
    st.sampled_from(
        [
            {"gte": 2},
            {"lt": 3},
            {"contains": "a"},
            {"contains": "beta"},
            {"startsWith": "al"},
            {"matches": "^d"},
        ]
    ),
    st.fixed_dictionaries({"n": small_int}),
)


def counts(exact_key: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.fixed_dictionaries({exact_key: small_int}),
        st.fixed_dictionaries({"min": small_int}),
        st.fixed_dictionaries({"max": small_int}),
        st.tuples(small_int, small_int).map(lambda t: {"min": min(t), "max": max(t)}),
    )


def drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def leaf_strategies(stream: list[Signal]) -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    """Strategies biased towards this stream: its names as patterns, its exact metric values
    as bounds, so that matches and boundary cases are common rather than rare."""
    present = sorted({s.name for s in stream})
    pattern = (
        st.one_of(st.sampled_from(present), st.sampled_from(PATTERNS))
        if present
        else st.sampled_from(PATTERNS)
    )
    episode = ReferenceEpisode(list(stream), default_model="claude-sonnet-4-5")
    measured = {
        "latency": episode.latency_ms(),
        "cost": episode.cost()[0],
        "tokens": float(episode.tokens("total")),
    }
    agent = st.sampled_from(AGENTS)
    tool = st.sampled_from([*TOOLS, "Re*", "Grep"])
    snapshot_value: st.SearchStrategy[dict[str, Any]] = st.one_of(
        st.fixed_dictionaries({"value": value_expect}),
        st.fixed_dictionaries({"exists": st.booleans()}),
        st.just({}),
    )
    path = st.sampled_from(["plan", "plan.n", "plan.tags[0]", "result", "result.n", "missing.x"])
    step = st.one_of(
        pattern,
        st.fixed_dictionaries(
            {"pattern": pattern, "payload": st.fixed_dictionaries({"agent": agent})}
        ),
    )
    strategies: dict[str, st.SearchStrategy[dict[str, Any]]] = {
        "signal.contains": st.builds(
            lambda p, pl: drop_none({"type": "signal.contains", "pattern": p, "payload": pl}),
            pattern,
            maybe_payload,
        ),
        "signal.not": st.builds(
            lambda p, pl: drop_none({"type": "signal.not", "pattern": p, "payload": pl}),
            pattern,
            maybe_payload,
        ),
        "signal.count": st.builds(
            lambda p, c: {"type": "signal.count", "pattern": p, **c}, pattern, counts("exact")
        ),
        "signal.trajectory": st.builds(
            lambda ps, strict, ign: {
                "type": "signal.trajectory",
                "patterns": ps,
                "strict": strict,
                "ignore": ign,
            },
            st.lists(step, min_size=1, max_size=4),
            st.booleans(),
            st.lists(st.sampled_from(["text:delta", "tool:result", "state:**"]), max_size=2),
        ),
        "signal.first": st.builds(
            lambda p, pl: drop_none({"type": "signal.first", "pattern": p, "payload": pl}),
            pattern,
            maybe_payload,
        ),
        "signal.last": st.builds(
            lambda p, pl: drop_none({"type": "signal.last", "pattern": p, "payload": pl}),
            pattern,
            maybe_payload,
        ),
        "snapshot.at": st.builds(
            lambda a, p, v: {"type": "snapshot.at", "afterSignal": a, "path": p, **v},
            pattern,
            path,
            snapshot_value,
        ),
        "snapshot.final": st.builds(
            lambda p, v: {"type": "snapshot.final", "path": p, **v}, path, snapshot_value
        ),
        "agent.activated": st.builds(
            lambda a, c: {"type": "agent.activated", "agentId": a, **c},
            agent,
            st.one_of(st.just({}), counts("count")),
        ),
        "agent.completed": st.builds(lambda a: {"type": "agent.completed", "agentId": a}, agent),
        "agent.causedBy": st.builds(
            lambda a, t, tr: {
                "type": "agent.causedBy",
                "agentId": a,
                "triggerPattern": t,
                "transitive": tr,
            },
            agent,
            pattern,
            st.booleans(),
        ),
        "agent.emitted": st.builds(
            lambda a, s: {"type": "agent.emitted", "agentId": a, "signal": s}, agent, pattern
        ),
        "agent.skipped": st.builds(
            lambda a, r: drop_none({"type": "agent.skipped", "agentId": a, "reason": r}),
            agent,
            st.sampled_from([None, "guard", {"startsWith": "bud"}]),
        ),
        "metric.activations": st.builds(
            lambda c: {"type": "metric.activations", **c}, counts("exact")
        ),
        "output.contains": st.builds(
            lambda t, cs: {"type": "output.contains", "text": t, "caseSensitive": cs},
            st.sampled_from(["done", "injection", "xss", "a"]),
            st.booleans(),
        ),
        "output.notContains": st.builds(
            lambda t, cs: {"type": "output.notContains", "text": t, "caseSensitive": cs},
            st.sampled_from(["done", "injection", "xss", "a"]),
            st.booleans(),
        ),
        "output.matches": st.builds(
            lambda r, f: {"type": "output.matches", "regex": r, "flags": f},
            st.sampled_from(["^d", "inj|XSS", "a+", "^$"]),
            st.sampled_from(["", "i"]),
        ),
        "output.json": st.just({"type": "output.json", "schema": {"type": "object"}}),
        "output.length": st.builds(
            lambda lo, hi: {"type": "output.length", "min": min(lo, hi), "max": max(lo, hi)},
            small_int,
            st.integers(0, 12),
        ),
        "tool.called": st.builds(
            lambda t, c: {"type": "tool.called", "name": t, **c},
            tool,
            st.one_of(st.just({}), counts("count")),
        ),
        "tool.notCalled": st.builds(lambda t: {"type": "tool.notCalled", "name": t}, tool),
        "tool.calledWith": st.builds(
            lambda t, a: {"type": "tool.calledWith", "name": t, "args": a},
            tool,
            st.sampled_from(
                [{"path": "a.ts"}, {"path": {"endsWith": "utils.ts"}}, {"n": {"gte": 2}}, {}]
            ),
        ),
        "tool.sequence": st.builds(
            lambda ts: {"type": "tool.sequence", "tools": ts},
            st.lists(tool, min_size=1, max_size=3),
        ),
        "llm.judge": st.builds(
            lambda m: {"type": "llm.judge", "criteria": ["helpful"], "minScore": m},
            st.sampled_from([0.0, 0.5, 1.0]),
        ),
    }
    for kind in ("latency", "cost", "tokens"):
        for bound in ("max", "min"):
            name = f"metric.{kind}.{bound}"
            values: list[float] = {
                "latency": [0.0, 40.0, 200.0, 3000.0],
                "cost": [0.0, 0.005, 0.05, 1.0],
                "tokens": [0.0, 500.0, 4000.0],
            }[kind] + [measured[kind]]
            extra = (
                st.sampled_from([{}, {"field": "input"}, {"field": "output"}])
                if kind == "tokens"
                else st.just({})
            )
            strategies[name] = st.builds(
                lambda v, e, n=name: {"type": n, "value": v, **e}, st.sampled_from(values), extra
            )
    return strategies


COMPOSITES = ("all", "any", "not")
KINDS = sorted(leaf_strategies([]))


def specs_for(stream: list[Signal]) -> st.SearchStrategy[dict[str, Any]]:
    return st.recursive(
        st.one_of(*leaf_strategies(stream).values()),
        lambda children: st.one_of(
            st.builds(
                lambda cs: {"type": "all", "assertions": cs},
                st.lists(children, min_size=1, max_size=3),
            ),
            st.builds(
                lambda cs: {"type": "any", "assertions": cs},
                st.lists(children, min_size=1, max_size=3),
            ),
            st.builds(lambda c: {"type": "not", "assertion": c}, children),
        ),
        max_leaves=6,
    )


def judge(request: JudgeRequest) -> Outcome:
    score = (len(request.output) % 5) / 4
    return Outcome.passed("ok") if score >= request.min_score else Outcome.failed("low")


def test_every_registered_type_has_a_strategy() -> None:
    assert set(all_types()) == set(KINDS) | set(COMPOSITES)


def assert_equivalent(
    stream: list[Signal], assertions: list[dict[str, Any]], with_judge: bool
) -> None:
    parsed = parse_all(assertions)
    j = judge if with_judge else None
    incremental = run_assertions(parsed, stream, judge=j, default_model="claude-sonnet-4-5")
    reference = run_reference(parsed, stream, judge=j, default_model="claude-sonnet-4-5")
    assert [o.verdict for o in incremental] == [o.verdict for o in reference], (
        [o.message for o in incremental],
        [o.message for o in reference],
    )


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), stream=signal_streams(), with_judge=st.booleans())
def test_each_type_incremental_equals_reference(
    kind: str, data: st.DataObject, stream: list[Signal], with_judge: bool
) -> None:
    assertions = data.draw(st.lists(leaf_strategies(stream)[kind], min_size=1, max_size=3))
    assert_equivalent(stream, assertions, with_judge)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), stream=signal_streams(), with_judge=st.booleans())
def test_compositions_incremental_equal_reference(
    data: st.DataObject, stream: list[Signal], with_judge: bool
) -> None:
    assertions = data.draw(st.lists(specs_for(stream), min_size=1, max_size=4))
    assert_equivalent(stream, assertions, with_judge)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), stream=signal_streams())
def test_early_verdicts_are_reached_at_the_same_signal_on_a_prefix(
    data: st.DataObject, stream: list[Signal]
) -> None:
    """An early verdict names a real signal, and the stream cut right after that signal
    reaches the same verdict at the same signal: the decision needed nothing that came later."""
    assertion = data.draw(specs_for(stream))
    [outcome] = run_assertions(parse_all([assertion]), stream, judge=judge)
    if outcome.decided_at is None:
        return
    ids = [s.id for s in stream]
    assert outcome.decided_at in ids
    cut = ids.index(outcome.decided_at) + 1
    [prefix_outcome] = run_assertions(parse_all([assertion]), stream[:cut], judge=judge)
    assert prefix_outcome.decided_at == outcome.decided_at
    assert prefix_outcome.verdict == outcome.verdict
