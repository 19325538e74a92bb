"""variants.yaml: the variants of a matrix run (the signal-native spec's HarnessVariant, as data).

    baseline: v1                      # optional: compare every other variant with this one
    variants:
      - id: v1
        name: Support agent v1
        target: support_agent.py:run  # a target spec (see docs/evals.md); relative paths are
        metadata: {model: small}      # resolved against this file's directory
        config: {style: thorough}     # handed to the target (recorder.config)

A bare list of variants is accepted too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from evalstream.assertions.errors import SuiteError
from evalstream.assertions.evalruns.models import Model
from evalstream.assertions.suite_format.yaml_positions import load_yaml, render_loc

JSON = Any


class VariantSpec(Model):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    id: str = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    target: str = Field(min_length=1)
    metadata: dict[str, JSON] = Field(default_factory=dict)
    config: dict[str, JSON] = Field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.name or self.id


class VariantsFile(Model):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    baseline: str | None = None
    variants: list[VariantSpec] = Field(min_length=1)
    base_dir: str = Field(".", exclude=True)


def load_variants(path: str | Path) -> VariantsFile:
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise SuiteError(f"cannot read variants: {exc.strerror or exc}", file=str(path)) from exc
    data, positions = load_yaml(text, str(path))
    if isinstance(data, list):
        data = {"variants": data}
    if not isinstance(data, dict):
        raise SuiteError(
            "a variants file must be a mapping with `variants:` (a list)", file=str(path)
        )
    try:
        parsed = VariantsFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        found = positions.find(loc, key=err["type"] == "extra_forbidden")
        line, column = found if found else (None, None)
        if err["type"] == "extra_forbidden":
            message = (
                f"unknown field {loc[-1]!r}; valid fields: "
                "id, name, description, target, metadata, config (and top-level baseline)"
            )
        elif err["type"] == "missing":
            message = f"missing required field `{loc[-1]}`"
        else:
            message = str(err["msg"])
        raise SuiteError(
            message, file=str(path), line=line, column=column, path=render_loc(loc) or None
        ) from exc
    ids = [v.id for v in parsed.variants]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise SuiteError(f"duplicate variant id(s): {', '.join(dupes)}", file=str(path))
    if parsed.baseline is not None and parsed.baseline not in ids:
        raise SuiteError(
            f"baseline {parsed.baseline!r} is not a variant; valid ids: {', '.join(ids)}",
            file=str(path),
        )
    return parsed.model_copy(update={"base_dir": str(path.parent)})
