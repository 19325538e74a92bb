"""Values of any JSON type in scoring settings and baseline files give an InputError that
names the setting, never a bare TypeError that does not say which setting it was: the
boundaries that read files check the types first."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstream.assertions.errors import InputError
from evalstream.assertions.scores.baselines import FileBaselines, RollingBaselines
from evalstream.assertions.scores.stage import ScoringSettings

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)

DETECTOR = {"name": "d", "pattern": "x+", "penalty": 0.5, "requires": ["x"]}
SETTINGS: dict[str, Any] = {
    "weights": {"correctness": 40, "cost": 20, "tool_match": 20, "latency": 10, "safety": 10},
    "safety": {
        "severity_penalties": {"high": 0.5, "unknown": 0.1},
        "error_penalty": 0.05,
        "extra_detectors": [DETECTOR],
    },
    "baselines": {"mode": "rolling", "window": 20, "key_attrs": ["agent_id"]},
}
ENTRY = {
    "episode_id": "e1",
    "outcome": "success",
    "step_count": 4,
    "cost_usd": 0.1,
    "latency_ms": 1000.0,
    "tool_names": ["search"],
}
ROLLING: dict[str, Any] = {
    "window": 3,
    "max_keys": 10,
    "min_episodes": 1,
    "key_attrs": ["agent_id"],
    "source": "rolling",
    "keys": [{"key": {"agent_id": "a"}, "entries": [ENTRY]}],
}
BASELINE_FILE: dict[str, Any] = {
    "source": "run:r",
    "baselines": [
        {
            "key": {"agent_id": "a", "case_id": "c"},
            "cost_usd": 0.1,
            "latency_ms": 1000.0,
            "tool_names": ["search"],
            "outcome": "success",
            "step_count": 4,
            "episodes": 3,
        }
    ],
}


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document where a value can be replaced."""
    out = []
    items = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    )
    for key, value in items:
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


def _replaced(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = dict(obj) if isinstance(obj, dict) else list(obj)
    copy[path[0]] = _replaced(obj[path[0]], path[1:], value)
    return copy


def _accepts_or_names(load: Any, document: Any) -> None:
    with contextlib.suppress(InputError):  # the named error the boundary promises
        load(document)


def test_the_documents_themselves_load() -> None:
    ScoringSettings.load(SETTINGS)
    RollingBaselines.from_json(ROLLING)
    FileBaselines.from_json(BASELINE_FILE)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_paths(SETTINGS)), JSON_VALUES)
def test_scoring_settings_of_any_type(path: tuple[Any, ...], value: Any) -> None:
    _accepts_or_names(ScoringSettings.load, _replaced(SETTINGS, path, value))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_paths(ROLLING)), JSON_VALUES)
def test_rolling_baselines_of_any_type(path: tuple[Any, ...], value: Any) -> None:
    _accepts_or_names(RollingBaselines.from_json, _replaced(ROLLING, path, value))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_paths(BASELINE_FILE)), JSON_VALUES)
def test_baseline_files_of_any_type(path: tuple[Any, ...], value: Any) -> None:
    _accepts_or_names(FileBaselines.from_json, _replaced(BASELINE_FILE, path, value))
