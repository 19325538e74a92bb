"""Structural comparison of a current output with a baseline (the eval-harness regression evals).

Paths are dotted, list positions are numbers, and `*` stands for any one segment:
`users.*.id` names the `id` of every user. A path pattern covers the whole subtree below it.

- `ignore_fields`: these paths are not compared at all (present or not).
- `ignore_values` / `require_keys` (the eval-harness JSON form): the path must exist, its value is
not
  compared; `require_keys` paths must exist in the current output.
- Placeholders in the baseline stand for any value of a kind: `{{any}}`, `{{any_string}}`,
  `{{any_number}}`, `{{any_uuid}}`, `{{any_email}}`, `{{any_iso_datetime}}`, `{{any_bool}}`.
- `tolerance`:
  `allow_additional_fields` (default true; `strict: true` turns it off) accepts keys the
  baseline lacks; `allow_field_reordering` is accepted for compatibility, since mapping key
  order never matters here; `allow_list_reordering` (default false) compares lists as
  multisets; `abs` / `rel` are numeric tolerances for every number; and any other key is a
  path with `{min_delta, max_delta}` bounds for `current - baseline` of every number below it
  (`null` = unbounded), as in the eval-harness `quality_scores: {min_delta: -0.3}`.
- `type`: `structural` (the above), `exact` (equality, with `ignore_fields`), or `numeric`
  (numbers within tolerance; non-numbers must be equal).

The score is the share of compared leaves that match; the grader passes with no difference.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalstream.assertions.graders.result import GradeResult

JSON = Any
Path = tuple[str, ...]

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")


def _is_number(value: JSON) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


PLACEHOLDERS: dict[str, Callable[[JSON], bool]] = {
    "{{any}}": lambda v: True,
    "{{any_string}}": lambda v: isinstance(v, str),
    "{{any_number}}": _is_number,
    "{{any_bool}}": lambda v: isinstance(v, bool),
    "{{any_uuid}}": lambda v: isinstance(v, str) and bool(_UUID.match(v)),
    "{{any_email}}": lambda v: isinstance(v, str) and bool(_EMAIL.match(v)),
    "{{any_iso_datetime}}": lambda v: isinstance(v, str) and bool(_ISO.match(v)),
}


class DeltaBounds(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    min_delta: float | None = None
    max_delta: float | None = None


class Tolerance(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    allow_additional_fields: bool = True
    allow_field_reordering: bool = True
    allow_list_reordering: bool = False
    abs: float = Field(0.0, ge=0)
    rel: float = Field(0.0, ge=0)
    deltas: dict[str, DeltaBounds] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _path_bounds(cls, data: JSON) -> JSON:
        """The eval-harness methodology writes per-path bounds next to the flags: split them out."""
        if not isinstance(data, dict):
            return data
        known = set(cls.model_fields)
        out = {k: v for k, v in data.items() if k in known}
        deltas = dict(out.get("deltas") or {})
        for key, value in data.items():
            if key in known:
                continue
            if not isinstance(value, dict):
                raise ValueError(
                    f"tolerance key {key!r}: expected {{min_delta, max_delta}} bounds for a "
                    f"path, or one of {', '.join(sorted(known))}"
                )
            deltas[key] = value
        out["deltas"] = deltas
        return out


class StructuralConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Literal["structural", "structural_match"] = "structural"
    type: Literal["structural", "exact", "numeric"] = "structural"
    strict: bool = False
    ignore_fields: list[str] = Field(default_factory=list)
    ignore_values: list[str] = Field(default_factory=list)
    require_keys: list[str] = Field(default_factory=list)
    tolerance: Tolerance = Field(default_factory=Tolerance)


@dataclass(frozen=True)
class Difference:
    path: str
    kind: str  # missing, unexpected, type, value, length, placeholder, delta
    expected: JSON = None
    actual: JSON = None

    def to_json(self) -> dict[str, JSON]:
        return {
            "path": self.path,
            "kind": self.kind,
            "expected": self.expected,
            "actual": self.actual,
        }


def _split(pattern: str) -> Path:
    return tuple(pattern.split(".")) if pattern else ()


def _covers(pattern: Path, path: Path) -> bool:
    """The pattern names `path` or one of its ancestors."""
    if len(pattern) > len(path):
        return False
    return all(p in ("*", s) for p, s in zip(pattern, path, strict=False))


def _render(path: Path) -> str:
    return ".".join(path) or "<root>"


def _lookup(value: JSON, path: Path) -> list[JSON]:
    """Every value at `path` (wildcards fan out); empty when absent."""
    if not path:
        return [value]
    head, rest = path[0], path[1:]
    if isinstance(value, Mapping):
        if head == "*":
            return [v for child in value.values() for v in _lookup(child, rest)]
        return _lookup(value[head], rest) if head in value else []
    if isinstance(value, list):
        if head == "*":
            return [v for child in value for v in _lookup(child, rest)]
        if head.isdigit() and int(head) < len(value):
            return _lookup(value[int(head)], rest)
    return []


class _Comparer:
    def __init__(self, config: StructuralConfig) -> None:
        self.config = config
        self.tol = config.tolerance
        self.additional = self.tol.allow_additional_fields and not config.strict
        self.ignored = [_split(p) for p in config.ignore_fields]
        self.value_blind = [_split(p) for p in config.ignore_values]
        self.deltas = [(_split(p), b) for p, b in self.tol.deltas.items()]
        self.diffs: list[Difference] = []
        self.leaves = 0

    def compare(self, expected: JSON, actual: JSON, path: Path) -> None:
        if any(_covers(p, path) for p in self.ignored):
            return
        if any(_covers(p, path) for p in self.value_blind):
            self.leaves += 1
            return
        if isinstance(expected, str) and expected in PLACEHOLDERS:
            self.leaves += 1
            if not PLACEHOLDERS[expected](actual):
                self._diff(path, "placeholder", expected, actual)
            return
        if isinstance(expected, Mapping):
            if not isinstance(actual, Mapping):
                self._type(path, expected, actual)
                return
            for key, value in expected.items():
                child = (*path, str(key))
                if key in actual:
                    self.compare(value, actual[key], child)
                elif not any(_covers(p, child) for p in self.ignored):
                    self.leaves += 1
                    self._diff(child, "missing", value, None)
            for key in actual:
                child = (*path, str(key))
                if key not in expected and not self._extra_ok(child):
                    self.leaves += 1
                    self._diff(child, "unexpected", None, actual[key])
            return
        if isinstance(expected, list):
            if not isinstance(actual, list):
                self._type(path, expected, actual)
                return
            self._lists(expected, actual, path)
            return
        self.leaves += 1
        if _is_number(expected) and _is_number(actual):
            self._numbers(float(expected), float(actual), path)
        elif type(expected) is not type(actual) and not (expected is None or actual is None):
            self._type(path, expected, actual, counted=True)
        elif expected != actual:
            self._diff(path, "value", expected, actual)

    def _extra_ok(self, path: Path) -> bool:
        return (self.config.type != "exact" and self.additional) or any(
            _covers(p, path) for p in self.ignored
        )

    def _lists(self, expected: list[JSON], actual: list[JSON], path: Path) -> None:
        every = (*path, "*")
        if any(_covers(p, every) for p in (*self.ignored, *self.value_blind)):
            self.leaves += 1  # `data.*` blinds every element: only "it is a list" is checked
            return
        if self.tol.allow_list_reordering and self.config.type != "exact":
            remaining = list(actual)
            for i, item in enumerate(expected):
                match = next((j for j, a in enumerate(remaining) if self._equal(item, a)), None)
                self.leaves += 1
                if match is None:
                    self._diff((*path, str(i)), "missing", item, None)
                else:
                    remaining.pop(match)
            if remaining and not self.additional:
                self._diff(path, "length", len(expected), len(actual))
            return
        # A one-element baseline list is a template for every element (the eval-harness
        # `users: [{id: "{{any_uuid}}", ...}]` describes a list of users of any length).
        if len(expected) == 1 and len(actual) != 1 and self.config.type == "structural":
            for i, item in enumerate(actual):
                self.compare(expected[0], item, (*path, str(i)))
            return
        if len(expected) != len(actual):
            self.leaves += 1
            self._diff(path, "length", len(expected), len(actual))
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            self.compare(e, a, (*path, str(i)))

    def _equal(self, expected: JSON, actual: JSON) -> bool:
        probe = _Comparer(self.config)
        probe.compare(expected, actual, ())
        return not probe.diffs

    def _numbers(self, expected: float, actual: float, path: Path) -> None:
        bounds = [b for p, b in self.deltas if _covers(p, path)]
        if bounds:
            delta = actual - expected
            for b in bounds:
                if (b.min_delta is not None and delta < b.min_delta) or (
                    b.max_delta is not None and delta > b.max_delta
                ):
                    self._diff(path, "delta", expected, actual)
                    return
            return
        if self.config.type == "exact":
            if expected != actual:
                self._diff(path, "value", expected, actual)
            return
        if not math.isclose(actual, expected, rel_tol=self.tol.rel, abs_tol=self.tol.abs):
            self._diff(path, "value", expected, actual)

    def _type(self, path: Path, expected: JSON, actual: JSON, *, counted: bool = False) -> None:
        if not counted:
            self.leaves += 1
        self._diff(path, "type", type(expected).__name__, type(actual).__name__)

    def _diff(self, path: Path, kind: str, expected: JSON, actual: JSON) -> None:
        self.diffs.append(Difference(_render(path), kind, expected, actual))


def compare_structures(
    baseline: JSON, current: JSON, config: StructuralConfig | None = None
) -> tuple[list[Difference], int]:
    """The differences and the number of compared leaves."""
    config = config or StructuralConfig()
    comparer = _Comparer(config)
    comparer.compare(baseline, current, ())
    for key in config.require_keys:
        if not _lookup(current, _split(key)):
            comparer.leaves += 1
            comparer.diffs.append(Difference(key, "missing", "required key", None))
    return comparer.diffs, comparer.leaves


def grade_structural(
    current: JSON, baseline: JSON, config: StructuralConfig | None = None
) -> GradeResult:
    diffs, leaves = compare_structures(baseline, current, config)
    score = 1.0 if leaves == 0 else max(0.0, (leaves - len(diffs)) / leaves)
    return GradeResult(
        passed=not diffs,
        score=score,
        details={"differences": [d.to_json() for d in diffs], "compared": leaves},
    )
