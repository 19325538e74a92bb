"""Suites (signal-native YAML datasets plus `match:` and `sample:` for live traffic, DESIGN §5).

A suite applies to an episode when its `match:` selects the episode's attributes (and the
episode falls in its `sample:`); its default assertions apply to every such episode, and a
case's assertions to episodes whose `attrs.case_id` names the case.

Attributes merge across an episode's signals, so selection waits (`SuiteSet.awaited`) while an
attribute that could change it is absent: a `match:` key of a suite not already ruled out by
another of its keys, and `case_id` when a selected suite has case assertions. An episode no
suite selects says why (`SuiteSet.unselected_reason`).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator

from evalstream.assertions.errors import SuiteError, SuiteWarning, located
from evalstream.assertions.evaluation.engine import Plan, PlannedAssertion
from evalstream.assertions.evaluation.registry import AssertionParseError, parse_assertion
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.kinds.base import CompileContext
from evalstream.assertions.suite_format.yaml_positions import (
    Loc,
    PositionMap,
    load_yaml,
    render_loc,
)
from evalstream.assertions.wire.patterns import compile_pattern

JSON = Any


class Case(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    id: str = Field(min_length=1, description="Unique case id; episodes name it in attrs.case_id.")
    name: str | None = None
    description: str | None = None
    input: JSON = Field(None, description="The case input (state for a dataset run).")
    assertions: list[SerializeAsAny[AssertionSpec]] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    timeout: float | None = Field(None, gt=0, description="Per-case timeout in ms.")
    skip: bool = False
    only: bool = False
    metadata: dict[str, JSON] = Field(default_factory=dict)


class Suite(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1)
    description: str | None = None
    version: str | None = None
    default_assertions: list[SerializeAsAny[AssertionSpec]] = Field(
        default_factory=list, alias="defaultAssertions"
    )
    default_timeout: float | None = Field(None, alias="defaultTimeout", gt=0)
    metadata: dict[str, JSON] = Field(default_factory=dict)
    match: dict[str, str | list[str]] = Field(
        default_factory=dict,
        description="Episode attributes this suite applies to (globs); empty = every episode.",
    )
    sample: float = Field(1.0, gt=0, le=1, description="Share of matching episodes evaluated.")
    cases: list[Case] = Field(default_factory=list)
    source: str | None = Field(None, exclude=True)

    @field_validator("cases")
    @classmethod
    def _unique_ids(cls, cases: list[Case]) -> list[Case]:
        seen: set[str] = set()
        for case in cases:
            if case.id in seen:
                raise ValueError(f"duplicate case id {case.id!r}")
            seen.add(case.id)
        return cases

    def case(self, case_id: str | None) -> Case | None:
        if case_id is None:
            return None
        for case in self.cases:
            if case.id == case_id:
                return case
        return None

    def matches(self, attrs: dict[str, JSON]) -> bool:
        for key, want in self.match.items():
            if key not in attrs or not _selects(want, attrs[key]):
                return False
        return True

    def mismatch(self, attrs: dict[str, JSON]) -> str | None:
        """The first `match:` key present in `attrs` with a value it does not select."""
        for key, want in self.match.items():
            if key in attrs and not _selects(want, attrs[key]):
                return f"{key} {attrs[key]!r} is not {_shown(want)}"
        return None

    @property
    def has_case_assertions(self) -> bool:
        return any(c.assertions and not c.skip for c in self.cases)

    def sampled(self, episode_id: str) -> bool:
        """Deterministic by episode id, so a replay samples the same episodes."""
        if self.sample >= 1.0:
            return True
        digest = hashlib.blake2b(f"{self.name}\0{episode_id}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64 < self.sample


def _selects(want: str | list[str], actual: JSON) -> bool:
    values = [str(v) for v in actual] if isinstance(actual, list) else [str(actual)]
    patterns = [want] if isinstance(want, str) else want
    return any(compile_pattern(p).matches(v) for p in patterns for v in values)


def _shown(want: str | list[str]) -> str:
    return want if isinstance(want, str) else " or ".join(want)


# --- loading -------------------------------------------------------------------------------


def parse_suite(data: JSON, filename: str, positions: PositionMap | None = None) -> Suite:
    positions = positions or PositionMap()

    def fail(loc: Loc, message: str, *, key: bool = False) -> SuiteError:
        found = positions.find(loc, key=key)
        line, column = found if found else (None, None)
        return SuiteError(
            message, file=filename, line=line, column=column, path=render_loc(loc) or None
        )

    if not isinstance(data, dict):
        raise fail((), "a suite must be a mapping with `name` and `cases`")
    data = dict(data)
    try:
        for key in ("defaultAssertions", "default_assertions"):
            if isinstance(data.get(key), list):
                data[key] = [parse_assertion(a, (key, i)) for i, a in enumerate(data[key])]
        if isinstance(data.get("cases"), list):
            cases = []
            for ci, raw_case in enumerate(data["cases"]):
                case = raw_case
                if isinstance(raw_case, dict) and isinstance(raw_case.get("assertions"), list):
                    case = dict(raw_case)
                    case["assertions"] = [
                        parse_assertion(a, ("cases", ci, "assertions", ai))
                        for ai, a in enumerate(raw_case["assertions"])
                    ]
                cases.append(case)
            data["cases"] = cases
    except AssertionParseError as exc:
        is_key = "unknown field" in exc.message
        raise fail(exc.loc, exc.message, key=is_key) from exc
    _read_string_list_nulls_as_written(data, filename, positions)
    try:
        suite = Suite.model_validate({**data, "source": filename})
    except ValidationError as exc:
        errors = exc.errors()
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc: Loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            valid = ", ".join(
                f.alias or n for n, f in _model_for(loc).model_fields.items() if n != "source"
            )
            raise fail(loc, f"unknown field {loc[-1]!r}; valid fields: {valid}", key=True) from exc
        if err["type"] == "missing":
            raise fail(loc[:-1], f"missing required field `{loc[-1]}`") from exc
        message = str(err["msg"]).removeprefix("Value error, ")
        value = err.get("input")
        shown = "" if isinstance(value, dict | list) else f" (got {value!r})"
        raise fail(loc, f"{message}{shown}") from exc
    return suite


def _read_string_list_nulls_as_written(
    data: dict[str, JSON], filename: str, positions: PositionMap
) -> None:
    """In the suite's lists of strings (a case's `tags`, a `match:` value), an unquoted
    `null` (`~`, `NULL`) is a word the author wrote, e.g. `tags: [debugging, null]`, not a
    missing value: it is read as written, with a warning saying to quote it. Rebuilds the
    lists in `data` (a copy) and never touches the caller's."""
    match = data.get("match")
    if isinstance(match, dict):
        data["match"] = {
            key: _strings(value, ("match", key), filename, positions)
            if isinstance(value, list)
            else value
            for key, value in match.items()
        }
    cases = data.get("cases")
    if isinstance(cases, list):
        data["cases"] = [
            {**case, "tags": _strings(case["tags"], ("cases", ci, "tags"), filename, positions)}
            if isinstance(case, dict) and isinstance(case.get("tags"), list)
            else case
            for ci, case in enumerate(cases)
        ]


def _strings(items: list[JSON], loc: Loc, filename: str, positions: PositionMap) -> list[JSON]:
    out = []
    for i, item in enumerate(items):
        spelled = positions.nulls.get((*loc, i)) if item is None else None
        if spelled:  # an empty item ("") stays None: validation names it
            line, column = positions.find((*loc, i)) or (None, None)
            message = (
                f"unquoted {spelled} read as the string {spelled!r} (YAML reads it as no "
                f'value); quote it ("{spelled}") to say so and silence this warning'
            )
            path = render_loc((*loc, i))
            # stacklevel 1: the message carries the suite file's own location
            warnings.warn(
                located(message, filename, line, column, path), SuiteWarning, stacklevel=1
            )
        out.append(spelled or item)
    return out


def _model_for(loc: Loc) -> type[BaseModel]:
    return Case if loc and loc[0] == "cases" and len(loc) >= 3 else Suite


def load_suite(path: str | Path) -> Suite:
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise SuiteError(f"cannot read suite: {exc.strerror or exc}", file=str(path)) from exc
    data, positions = load_yaml(text, str(path))
    if data is None:
        raise SuiteError("the suite file is empty", file=str(path))
    return parse_suite(data, str(path), positions)


# --- selection -----------------------------------------------------------------------------


class SuiteSet:
    """Selects and compiles (once per selection) the plan for an episode."""

    def __init__(self, suites: Sequence[Suite], ctx: CompileContext | None = None) -> None:
        self.suites = list(suites)
        self.ctx = ctx or CompileContext()
        self._plans: dict[tuple[tuple[int, str | None], ...], Plan] = {}
        # Nothing to await when no suite matches on attributes or has case assertions.
        self._may_await = any(s.match or s.has_case_assertions for s in self.suites)

    def awaited(self, episode_id: str, attrs: dict[str, JSON]) -> tuple[str, ...]:
        """Attributes absent from `attrs` that could still change the selection: the
        `match:` keys of suites no present attribute rules out, and `case_id` when such a
        suite has case assertions. Empty: the selection is final."""
        if not self._may_await:
            return ()
        awaited: dict[str, None] = {}
        for suite in self.suites:
            if suite.mismatch(attrs) is not None or not suite.sampled(episode_id):
                continue
            for key in suite.match:
                if key not in attrs:
                    awaited[key] = None
            if suite.has_case_assertions and "case_id" not in attrs:
                awaited["case_id"] = None
        return tuple(awaited)

    def unselected_reason(self, episode_id: str, attrs: dict[str, JSON]) -> str | None:
        """Why no suite gives an episode with `attrs` an assertion, suite by suite; attributes
        absent from every signal are named first. None without suites."""
        if not self.suites:
            return None
        missing: dict[str, list[str]] = {}
        other: list[str] = []
        case_id = attrs.get("case_id")
        for suite in self.suites:
            mismatch = suite.mismatch(attrs)
            absent = [key for key in suite.match if key not in attrs]
            if mismatch is not None:
                other.append(f"suite {suite.name!r}: {mismatch}")
            elif absent:
                for key in absent:
                    missing.setdefault(key, []).append(repr(suite.name))
            elif not suite.sampled(episode_id):
                other.append(f"suite {suite.name!r}: not sampled (sample: {suite.sample})")
            else:
                case = f"case {case_id!r}" if isinstance(case_id, str) else "case_id"
                other.append(f"suite {suite.name!r}: no default assertions, and no {case}")
        parts = [
            f"{key} missing on every signal (suite {', '.join(names)} matches on it)"
            for key, names in missing.items()
        ]
        return "no suite matched: " + "; ".join(parts + other)

    def selection(
        self, episode_id: str, attrs: dict[str, JSON]
    ) -> tuple[tuple[int, str | None], ...]:
        case_id = attrs.get("case_id")
        case_key = case_id if isinstance(case_id, str) else None
        chosen: list[tuple[int, str | None]] = []
        for i, suite in enumerate(self.suites):
            if not suite.matches(attrs) or not suite.sampled(episode_id):
                continue
            case = suite.case(case_key)
            use_case = case is not None and not case.skip and bool(case.assertions)
            if suite.default_assertions or use_case:
                chosen.append((i, case_key if use_case else None))
        return tuple(chosen)

    def plan_for(self, episode_id: str, attrs: dict[str, JSON]) -> Plan:
        key = self.selection(episode_id, attrs)
        plan = self._plans.get(key)
        if plan is None:
            planned: list[PlannedAssertion] = []
            for suite_index, case_id in key:
                suite = self.suites[suite_index]
                planned.extend(
                    PlannedAssertion(spec, suite.name, "default")
                    for spec in suite.default_assertions
                )
                case = suite.case(case_id)
                if case is not None:
                    planned.extend(
                        PlannedAssertion(spec, suite.name, "case", case.id)
                        for spec in case.assertions
                    )
            plan = Plan(planned, self.ctx)
            self._plans[key] = plan
        return plan

    def knows_case(self, case_id: str) -> bool:
        return any(s.case(case_id) is not None for s in self.suites)
