"""The registry of assertion types: built-ins plus entry points (group `evalstream.assertions`).

Parsing an assertion looks its `type` up here, so a third-party type is a spec model, a
compiler and a reference evaluator registered under a name, loaded lazily on first use.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from pydantic import ValidationError

from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.kinds import (
    agent,
    compose,
    judge,
    metric,
    output,
    signal,
    snapshot,
    tool,
)
from evalstream.assertions.kinds.base import AssertionType

ENTRY_POINT_GROUP = "evalstream.assertions"
Loc = tuple[str | int, ...]


class AssertionParseError(ValueError):
    """An assertion that does not validate; `loc` points into the document."""

    def __init__(self, loc: Loc, message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


@functools.cache
def builtin_types() -> dict[str, AssertionType]:
    types: dict[str, AssertionType] = {}
    for module in (signal, snapshot, agent, metric, output, tool, judge, compose):
        for at in module.TYPES:
            types[at.name] = at
    return types


@functools.cache
def _plugin_types() -> dict[str, AssertionType]:
    found: dict[str, AssertionType] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        loaded = ep.load()
        items = loaded if isinstance(loaded, list | tuple) else [loaded]
        for at in items:
            if not isinstance(at, AssertionType):
                raise TypeError(
                    f"entry point {ep.name!r} ({ep.value}) must provide an AssertionType "
                    f"or a list of them, got {type(at).__name__}"
                )
            found[at.name] = at
    return found


_extra: dict[str, AssertionType] = {}


def register(at: AssertionType) -> None:
    """Register a type programmatically (tests, embedding applications)."""
    _extra[at.name] = at


def all_types() -> dict[str, AssertionType]:
    return {**builtin_types(), **_plugin_types(), **_extra}


def lookup(name: str) -> AssertionType | None:
    found = builtin_types().get(name) or _extra.get(name)
    if found is None:
        found = _plugin_types().get(name)
    return found


def type_of(spec: AssertionSpec) -> AssertionType:
    found = lookup(spec.type)
    if found is None:  # pragma: no cover - specs only come from parse_assertion
        raise KeyError(spec.type)
    return found


def _field_names(model: type[AssertionSpec]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def parse_assertion(data: Any, loc: Loc = ()) -> AssertionSpec:
    """Validate one assertion (recursively for all/any/not)."""
    if not isinstance(data, Mapping):
        raise AssertionParseError(
            loc, f"an assertion must be a mapping with a `type`, got {type(data).__name__}"
        )
    kind = data.get("type")
    names = sorted(all_types())
    if not isinstance(kind, str):
        raise AssertionParseError(loc, f"assertion has no `type`; valid types: {', '.join(names)}")
    at = lookup(kind)
    if at is None:
        close = difflib.get_close_matches(kind, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise AssertionParseError(
            (*loc, "type"),
            f"unknown assertion type {kind!r}{hint}; valid types: {', '.join(names)}",
        )
    data = dict(data)
    if kind in ("all", "any") and isinstance(data.get("assertions"), list):
        data["assertions"] = [
            parse_assertion(child, (*loc, "assertions", i))
            for i, child in enumerate(data["assertions"])
        ]
    if kind == "not" and isinstance(data.get("assertion"), Mapping):
        data["assertion"] = parse_assertion(data["assertion"], (*loc, "assertion"))
    try:
        return at.spec.model_validate(data)
    except ValidationError as exc:
        raise _explain(exc, at, loc) from exc


def _explain(exc: ValidationError, at: AssertionType, loc: Loc) -> AssertionParseError:
    errors = exc.errors()
    # A misspelt field shows up as both "unknown" and "missing": the unknown one explains more.
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    where: Loc = (*loc, *err["loc"])
    kind = err["type"]
    fields = ", ".join(_field_names(at.spec))
    if kind == "extra_forbidden":
        bad = err["loc"][-1] if err["loc"] else "?"
        close = difflib.get_close_matches(str(bad), _field_names(at.spec), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return AssertionParseError(
            where, f"unknown field {bad!r} for {at.name}{hint}; valid fields: {fields}"
        )
    if kind == "missing":
        return AssertionParseError(where, f"{at.name} needs `{err['loc'][-1]}`; fields: {fields}")
    message = str(err["msg"]).removeprefix("Value error, ")
    value = err.get("input")
    shown = "" if isinstance(value, Mapping) else f" (got {value!r})"
    return AssertionParseError(where, f"{at.name}: {message}{shown}")
