"""Value matchers, payload partial matching and state paths (DESIGN §4).

Expected values from suites are compiled once into small predicate trees; the hot path only
calls predicates. Semantics:
- objects match partially and recursively (extra actual keys are ignored);
- lists match element-wise and must have equal length;
- an object with exactly one key among MATCHER_KEYS is a value matcher, at any depth;
- scalars compare with JSON equality (`true` is not `1`; `1` equals `1.0`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

from evalstream.assertions.evaluation.bounded_regex import compile_regex

JSON = Any
Predicate = Callable[[JSON], bool]

MATCHER_KEYS = (
    "gte",
    "lte",
    "gt",
    "lt",
    "between",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
)


def is_number(value: JSON) -> TypeGuard[int | float]:
    kind = type(value)  # exact types first: decoded JSON never holds subclasses
    if kind is int or kind is float:
        return True
    if kind is bool or value is None:
        return False
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_equal(a: JSON, b: JSON) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return bool(a == b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def is_value_matcher(expected: JSON) -> bool:
    return (
        isinstance(expected, dict) and len(expected) == 1 and next(iter(expected)) in MATCHER_KEYS
    )


def compile_expected(expected: JSON, where: str = "value") -> Predicate:
    """Compile an expected value into a predicate. Raises ValueError naming `where`."""
    if is_value_matcher(expected):
        ((key, arg),) = expected.items()
        return _compile_matcher(key, arg, where)
    if isinstance(expected, dict):
        parts = [(k, compile_expected(v, f"{where}.{k}")) for k, v in expected.items()]
        return _object_predicate(parts)
    if isinstance(expected, list):
        items = [compile_expected(v, f"{where}[{i}]") for i, v in enumerate(expected)]
        return _list_predicate(items)
    return lambda actual: json_equal(actual, expected)


_MISSING = object()


def _object_predicate(parts: list[tuple[str, Predicate]]) -> Predicate:
    def match(actual: JSON) -> bool:
        if not isinstance(actual, dict):
            return False
        for key, pred in parts:
            value = actual.get(key, _MISSING)
            if value is _MISSING or not pred(value):
                return False
        return True

    return match


def _list_predicate(items: list[Predicate]) -> Predicate:
    n = len(items)

    def match(actual: JSON) -> bool:
        if not isinstance(actual, list) or len(actual) != n:
            return False
        return all(pred(value) for pred, value in zip(items, actual, strict=True))

    return match


def _need_number(key: str, arg: JSON, where: str) -> float:
    if not is_number(arg):
        raise ValueError(f"{where}: `{key}` takes a number, got {arg!r}")
    return float(arg)


def _compile_matcher(key: str, arg: JSON, where: str) -> Predicate:
    if key in ("gte", "lte", "gt", "lt"):
        bound = _need_number(key, arg, where)
        compare: Callable[[float], bool] = {
            "gte": lambda v: v >= bound,
            "lte": lambda v: v <= bound,
            "gt": lambda v: v > bound,
            "lt": lambda v: v < bound,
        }[key]
        return lambda actual: is_number(actual) and compare(actual)
    if key == "between":
        if not (isinstance(arg, list) and len(arg) == 2 and all(is_number(x) for x in arg)):
            raise ValueError(f"{where}: `between` takes [low, high] numbers, got {arg!r}")
        low, high = float(arg[0]), float(arg[1])
        if low > high:
            raise ValueError(f"{where}: `between` low {low:g} is above high {high:g}")
        return lambda actual: is_number(actual) and low <= actual <= high
    if key == "contains":
        return lambda actual: _contains(actual, arg)
    if key in ("startsWith", "endsWith"):
        if not isinstance(arg, str):
            raise ValueError(f"{where}: `{key}` takes a string, got {arg!r}")
        if key == "startsWith":
            return lambda actual: isinstance(actual, str) and actual.startswith(arg)
        return lambda actual: isinstance(actual, str) and actual.endswith(arg)
    if key == "matches":
        if not isinstance(arg, str):
            raise ValueError(f"{where}: `matches` takes a regex string, got {arg!r}")
        try:
            bounded = compile_regex(arg, memo=True)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from exc
        return lambda actual: isinstance(actual, str) and bounded.search(actual)
    raise ValueError(f"{where}: unknown matcher {key!r}; valid: {', '.join(MATCHER_KEYS)}")


def _contains(actual: JSON, needle: JSON) -> bool:
    if isinstance(actual, str):
        return isinstance(needle, str) and needle in actual
    if isinstance(actual, list):
        return any(json_equal(item, needle) for item in actual)
    return False


# --- state paths: `a.b[0].c` -------------------------------------------------------------

PathPart = str | int
_SEGMENT = re.compile(r"([^.\[\]]+)?((?:\[\d+\])*)")


def parse_path(path: str) -> tuple[PathPart, ...]:
    if not path:
        raise ValueError("path is empty; write e.g. `analysis.confidence` or `files[0].path`")
    parts: list[PathPart] = []
    for segment in path.split("."):
        m = _SEGMENT.fullmatch(segment)
        if m is None or (m.group(1) is None and not m.group(2)):
            raise ValueError(f"path {path!r} has a bad segment {segment!r}; write e.g. `a.b[0].c`")
        if m.group(1) is not None:
            parts.append(m.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    return tuple(parts)


def resolve_path(root: JSON, parts: Sequence[PathPart]) -> tuple[bool, JSON]:
    """Return (found, value)."""
    node = root
    for part in parts:
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                return False, None
            node = node[part]
        else:
            if not isinstance(node, dict) or part not in node:
                return False, None
            node = node[part]
    return True, node
