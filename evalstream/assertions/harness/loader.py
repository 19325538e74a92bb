"""Loading the eval-harness eval files and suites (YAML or JSON) into `EvalItem`s.

A suite's `evals: [{$ref: path}]` are resolved relative to the suite file; a referenced file may
itself be a suite. Cycles and duplicate item keys are errors. Every error is a `SuiteError`
with file, line and column.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from evalstream.assertions.errors import SuiteError
from evalstream.assertions.harness.models import (
    CapabilityEval,
    EvalFile,
    EvalItem,
    EvalSuite,
    RegressionEval,
    items_of_capability,
    items_of_file,
    items_of_regression,
)
from evalstream.assertions.harness.thresholds import EvalTrigger
from evalstream.assertions.suite_format.yaml_positions import (
    Loc,
    PositionMap,
    load_yaml,
    render_loc,
)

JSON = Any
M = TypeVar("M", bound=BaseModel)


@dataclass
class LoadedEvals:
    items: list[EvalItem] = field(default_factory=list)
    suite: EvalSuite | None = None
    files: list[str] = field(default_factory=list)


class _Document:
    def __init__(self, filename: str, positions: PositionMap) -> None:
        self.filename = filename
        self.positions = positions

    def error(self, loc: Loc, message: str) -> SuiteError:
        found = self.positions.find(loc)
        line, column = found if found else (None, None)
        return SuiteError(
            message, file=self.filename, line=line, column=column, path=render_loc(loc) or None
        )

    def validate(self, model: type[M], data: JSON, loc: Loc) -> M:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where: Loc = (*loc, *err["loc"])
            message = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] == "missing":
                raise self.error(where[:-1], f"missing required field `{where[-1]}`") from exc
            if err["type"] == "extra_forbidden":
                fields = ", ".join(f.alias or n for n, f in model.model_fields.items())
                message = f"unknown field {where[-1]!r}; valid fields at the top: {fields}"
            raise self.error(where, message) from exc


def load_evals(path: str | Path) -> LoadedEvals:
    """Every gradable item of an eval-harness eval file or suite."""
    loaded = LoadedEvals()
    _load(Path(path), loaded, stack=())
    keys: dict[str, str] = {}
    for item in loaded.items:
        if item.key in keys:
            raise SuiteError(
                f"eval {item.key!r} is defined twice (also in {keys[item.key]}); ids must be "
                "unique across a suite",
                file=item.source,
            )
        keys[item.key] = item.source
    return loaded


def _read(path: Path) -> tuple[JSON, _Document]:
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise SuiteError(f"cannot read eval file: {exc.strerror or exc}", file=str(path)) from exc
    data, positions = load_yaml(text, str(path))  # JSON is YAML: one loader, with positions
    if data is None:
        raise SuiteError("the eval file is empty", file=str(path))
    return data, _Document(str(path), positions)


def _load(path: Path, loaded: LoadedEvals, stack: tuple[Path, ...]) -> None:
    resolved = path.resolve()
    if resolved in stack:
        chain = " -> ".join(str(p) for p in (*stack, resolved))
        raise SuiteError(f"$ref cycle: {chain}", file=str(path))
    data, doc = _read(path)
    loaded.files.append(str(path))
    if isinstance(data, dict) and "eval_suite" in data:
        suite = doc.validate(EvalSuite, data["eval_suite"], ("eval_suite",))
        if "eval_trigger" in data and suite.eval_trigger is None:
            trigger = doc.validate(EvalTrigger, data["eval_trigger"], ("eval_trigger",))
            suite = suite.model_copy(update={"eval_trigger": trigger})
        if loaded.suite is None:
            loaded.suite = suite
        for i, ref in enumerate(suite.evals):
            target = path.parent / ref.ref
            if not target.is_file():
                raise doc.error(
                    ("eval_suite", "evals", i, "$ref"),
                    f"$ref {ref.ref!r} names no file (looked for {target})",
                )
            _load(target, loaded, (*stack, resolved))
        return
    loaded.items.extend(_items(data, doc))


def _items(data: JSON, doc: _Document) -> list[EvalItem]:
    if isinstance(data, dict):
        if "schema_version" in data or "eval_type" in data:
            ev = doc.validate(EvalFile, data, ())
            return _convert(doc, (), functools.partial(items_of_file, ev, doc.filename))
        for key in ("capability_eval", "regression_eval"):
            if key in data:
                return _list(data[key], doc, (key,), regression=key == "regression_eval")
        if "baseline" in data or "grader" in data:
            return _list([data], doc, (), regression="baseline" in data, single=True)
    if isinstance(data, list):
        return _list(data, doc, (), regression=None)
    raise doc.error(
        (),
        "not an eval-harness eval: expected an eval file (schema_version, eval_type, ...), a suite "
        "(eval_suite: ...), or capability / regression eval items (id, grader / baseline, ...)",
    )


def _list(
    data: JSON, doc: _Document, loc: Loc, *, regression: bool | None, single: bool = False
) -> list[EvalItem]:
    entries = data if isinstance(data, list) else [data]
    items: list[EvalItem] = []
    for i, entry in enumerate(entries):
        where = loc if single or not isinstance(data, list) else (*loc, i)
        is_regression = (
            regression
            if regression is not None
            else (isinstance(entry, dict) and "baseline" in entry)
        )
        if is_regression:
            reg = doc.validate(RegressionEval, entry, where)
            items += _convert(doc, where, functools.partial(items_of_regression, reg, doc.filename))
        else:
            cap = doc.validate(CapabilityEval, entry, where)
            make = functools.partial(items_of_capability, cap, doc.filename)
            items += _convert(doc, (*where, "grader"), make)
    return items


def _convert(doc: _Document, loc: Loc, make: Callable[[], list[EvalItem]]) -> list[EvalItem]:
    """Grader configurations are typed on conversion: their errors point at the eval."""
    try:
        result = make()
    except ValidationError as exc:
        err = exc.errors()[0]
        field_path = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        raise doc.error(loc, f"grader config {field_path}: {message}".strip()) from exc
    except ValueError as exc:
        raise doc.error(loc, str(exc)) from exc
    return result
