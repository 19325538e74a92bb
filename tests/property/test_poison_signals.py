"""Adversarial signals mixed into ordinary traffic never stop the process, and every ordinary
episode is reported exactly as it is without them: through `check` on a file, the embedded
runtime (`up`) on a file, and the gateway (its published records then evaluated by the
pipeline, as `up --gateway-port` does).

The poison is extreme and non-finite numbers (written as JSON's `Infinity`/`NaN` extensions,
which every reader must refuse), out-of-range and odd timestamps, huge and odd ids (control
characters, NUL, lone surrogates, escaped in JSON as `\\ud800`), deep payloads and unicode
edge cases, in episodes of their own. Their in-range timestamps stay within the ordinary
traffic's time, so event time (the watermark) is the same with and without them."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from starlette.testclient import TestClient

from evalstream.assertions.suite_format.suites import Suite, parse_suite
from evalstream.assertions.suite_format.yaml_positions import load_yaml
from evalstream.connectors.gateway import GatewaySettings, MemoryPublisher, create_gateway_app
from evalstream.stream.embedded import run_embedded
from evalstream.stream.offline import check_files
from evalstream.stream.pipeline import EPISODES, Envelope, MemorySink, Pipeline
from tests.gateway.live import bearer, token_env

SUITE_TEXT = """name: tiny
defaultAssertions:
  - type: signal.not
    pattern: "error:*"
  - type: metric.cost.max
    value: 1.0
cases:
  - id: c
    input: {}
    assertions:
      - type: tool.called
        name: Edit
"""
T0 = 1_767_225_600_000
SPAN_MS = 3_000  # the ordinary traffic's time


def _suite() -> Suite:
    data, positions = load_yaml(SUITE_TEXT, "tiny.yaml")
    return parse_suite(data, "tiny.yaml", positions)


SUITES = [_suite()]


def ordinary_episode(eid: str, t0: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{eid}-1", "episode_id": eid, "name": "harness:start", "timestamp": t0,
         "attrs": {"case_id": "c", "agent_id": "a"}},
        {"id": f"{eid}-2", "episode_id": eid, "name": "tool:call", "timestamp": t0 + 100,
         "payload": {"name": "Edit"}},
        {"id": f"{eid}-3", "episode_id": eid, "name": "provider:end", "timestamp": t0 + 150,
         "payload": {"costUsd": 0.01, "output": {"usage": {"inputTokens": 10}}}},
        {"id": f"{eid}-4", "episode_id": eid, "name": "harness:end", "timestamp": t0 + 200,
         "payload": {"output": "ok"}},
    ]  # fmt: skip


ORDINARY = [
    *ordinary_episode("good1", T0),
    *ordinary_episode("good2", T0 + 1000),
    *ordinary_episode("good3", T0 + 2000),
]

EXTREME_NUMBERS = st.sampled_from(
    [1e308, -1e308, 1e20, -1e20, 2**64, -(2**63) - 1, 2**70, 5e-324, -0.0, -1]
) | st.floats(allow_nan=True, allow_infinity=True)
ODD_TEXT = st.text(
    alphabet=st.characters(codec=None, categories=None), max_size=30
)  # every code point: NUL, controls, lone surrogates, non-characters
IDS = st.one_of(
    st.just("poison"),
    ODD_TEXT.map(lambda t: "p" + t),  # never an ordinary episode's id
    st.integers(257, 100_000).map(lambda n: "p" * n),
    st.sampled_from(["p\x00", "p\ud800", "p\u2028", "p\ufeff", "p🚀" * 100]),
)
TIMESTAMPS: st.SearchStrategy[Any] = st.one_of(
    EXTREME_NUMBERS,
    st.integers(0, T0 + SPAN_MS),  # in range and within the ordinary traffic's time
    st.sampled_from(
        ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "not a date", ""]
    ),
    st.sampled_from([None, True, [], {}]),
)
JSON_LEAVES = st.one_of(st.none(), st.booleans(), EXTREME_NUMBERS, ODD_TEXT, st.integers())
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ODD_TEXT, inner, max_size=3),
    max_leaves=12,
)


@st.composite
def deep(draw: st.DrawFn) -> Any:
    value: Any = draw(JSON_LEAVES)
    for _ in range(draw(st.integers(1, 600))):
        value = [value] if draw(st.booleans()) else {"k": value}
    return value


PAYLOADS = st.one_of(
    JSON_VALUES,
    deep(),
    st.fixed_dictionaries(
        {"costUsd": EXTREME_NUMBERS, "durationMs": EXTREME_NUMBERS},
    ),
    st.fixed_dictionaries({"output": st.fixed_dictionaries({"usage": st.dictionaries(
        st.sampled_from(["inputTokens", "outputTokens", "totalTokens", "prompt_tokens"]),
        EXTREME_NUMBERS, min_size=1)})}),
)  # fmt: skip


@st.composite
def poison(draw: st.DrawFn) -> dict[str, Any]:
    signal: dict[str, Any] = {
        "id": draw(IDS),
        "episode_id": draw(IDS),
        "name": draw(
            st.sampled_from(["tool:call", "provider:end", "harness:end", "error:api"]) | ODD_TEXT
        ),
        "timestamp": draw(TIMESTAMPS),
        "payload": draw(PAYLOADS),
    }
    if draw(st.booleans()):
        signal["seq"] = draw(EXTREME_NUMBERS | st.integers())
    if draw(st.booleans()):
        signal["source"] = {"agent": draw(IDS), "parent": draw(IDS)}
    if draw(st.booleans()):
        signal["attrs"] = {"case_id": draw(IDS), "agent_id": draw(IDS), "model": draw(IDS)}
    return signal


@st.composite
def traffic(draw: st.DrawFn) -> list[dict[str, Any]]:
    """The ordinary signals in order, with 1-4 poison signals at random places."""
    mixed = list(ORDINARY)
    for item in draw(st.lists(poison(), min_size=1, max_size=4)):
        mixed.insert(draw(st.integers(0, len(mixed))), item)
    return mixed


def line(record: dict[str, Any]) -> str:
    # json, not orjson: writes NaN/Infinity and escapes lone surrogates, as a careless
    # producer would; every reader must refuse those lines, not die on them.
    try:
        return json.dumps(record)
    except RecursionError:
        return '{"deep": ' + "[" * 100_000 + "]" * 100_000 + "}"


def ordinary_only(episodes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in episodes.items() if k.split("/")[-1].startswith("good")}


def through_check(path: Path) -> dict[str, dict[str, Any]]:
    report = check_files([str(path)], SUITES)
    return {r.episode_id: r.to_json() for r in report.results}


def through_up(path: Path) -> dict[str, dict[str, Any]]:
    run = asyncio.run(run_embedded([str(path)], SUITES))
    return {r.episode_id: r.to_json() for r in run.results}


def through_gateway(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each signal posted on its own, then what the gateway published, evaluated."""
    publisher = MemoryPublisher()
    app = create_gateway_app(GatewaySettings(tokens=token_env()), publisher)
    headers = {**bearer("acme"), "content-type": "application/json"}
    with TestClient(app) as http:
        for record in records:
            response = http.post("/v1/signals", content=line(record), headers=headers)
            assert response.status_code < 500, response.text
    sink = MemorySink()
    pipeline = Pipeline(SUITES, sink, event_time=True)

    async def evaluate() -> None:
        for out in publisher.records:
            await pipeline.handle(Envelope(out.stream, out.value, key=out.key.encode()))
        await pipeline.drain()

    asyncio.run(evaluate())
    return dict(sink.records[EPISODES])


def write(records: list[dict[str, Any]], directory: str) -> Path:
    path = Path(directory) / "signals.jsonl"
    path.write_text("".join(line(r) + "\n" for r in records), encoding="utf-8", errors="replace")
    return path


with tempfile.TemporaryDirectory() as _directory:
    CLEAN_PATH = write(ORDINARY, _directory)
    CLEAN = {"check": through_check(CLEAN_PATH), "up": through_up(CLEAN_PATH)}
CLEAN["gateway"] = through_gateway(ORDINARY)


def test_the_clean_runs_report_every_ordinary_episode() -> None:
    for episodes in CLEAN.values():
        assert len(ordinary_only(episodes)) == 3
        assert {e["status"] for e in episodes.values()} == {"passed"}


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(traffic())
def test_poison_never_stops_the_process_nor_changes_an_ordinary_episode(
    records: list[dict[str, Any]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = write(records, directory)
        assert ordinary_only(through_check(path)) == CLEAN["check"]
        assert ordinary_only(through_up(path)) == CLEAN["up"]
    assert ordinary_only(through_gateway(records)) == ordinary_only(CLEAN["gateway"])
