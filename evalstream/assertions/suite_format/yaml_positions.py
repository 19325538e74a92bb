"""YAML loading that remembers where every key and value came from (line and column).

Validation errors carry a location path such as `cases[2].assertions[0].pattern`; this maps
it back to the file position, so every suite error says file:line:column.
"""

from __future__ import annotations

from typing import Any

import yaml

from evalstream.assertions.errors import SuiteError

Loc = tuple[str | int, ...]
Position = tuple[int, int]  # 1-based line and column


class PositionMap:
    def __init__(self) -> None:
        self.values: dict[Loc, Position] = {}
        self.keys: dict[Loc, Position] = {}
        # How each null value was spelled (`null`, `~`, `NULL`; "" for nothing): a string
        # field can read it back as written (evalstream.assertions.suite_format.suites).
        self.nulls: dict[Loc, str] = {}

    def find(self, loc: Loc, *, key: bool = False) -> Position | None:
        """The position of `loc` (its key when `key`), else of its nearest known parent."""
        if key and loc in self.keys:
            return self.keys[loc]
        probe = loc
        while True:
            if probe in self.values:
                return self.values[probe]
            if not probe:
                return None
            probe = probe[:-1]


def _pos(mark: Any) -> Position:
    return (mark.line + 1, mark.column + 1)


def load_yaml(text: str, filename: str) -> tuple[Any, PositionMap]:
    loader = yaml.SafeLoader(text)
    positions = PositionMap()
    try:
        node = loader.get_single_node()
        if node is None:
            return None, positions
        return _build(loader, node, (), positions, filename), positions
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise SuiteError(
            f"invalid YAML: {exc.problem or exc.context}",
            file=filename,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from exc
    except yaml.YAMLError as exc:
        raise SuiteError(f"invalid YAML: {exc}", file=filename) from exc
    finally:
        loader.dispose()


def _build(
    loader: yaml.SafeLoader, node: yaml.Node, loc: Loc, pos: PositionMap, filename: str
) -> Any:
    pos.values[loc] = _pos(node.start_mark)
    if isinstance(node, yaml.MappingNode):
        explicit: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            if key in explicit:
                line, col = _pos(key_node.start_mark)
                raise SuiteError(f"duplicate key {key!r}", file=filename, line=line, column=col)
            explicit.add(key)
        # Resolve `<<:` merge keys; merged pairs come first, so explicit keys override them.
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            child = (*loc, key)
            pos.keys[child] = _pos(key_node.start_mark)
            out[key] = _build(loader, value_node, child, pos, filename)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(loader, item, (*loc, i), pos, filename) for i, item in enumerate(node.value)]
    value = loader.construct_object(node, deep=True)
    if value is None and isinstance(node, yaml.ScalarNode):
        pos.nulls[loc] = node.value
    return value


def render_loc(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
