"""output.contains / notContains / matches / json / length, over the episode output.

The output is `harness:end.payload.output` if present, else the last `text:complete`
content, else the last `provider:end` output content. An episode with no output fails every
output assertion: a guard must not pass vacuously.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import orjson
from pydantic import Field, field_validator, model_validator

from evalstream.assertions.evaluation.bounded_regex import VALID_FLAGS, BoundedRegex, compile_regex
from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.spec_base import AssertionSpec
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.kinds.base import AssertionType, CompileContext, Interest, Leaf, short

JSON = Any
NO_OUTPUT = (
    "the episode has no output "
    "(no harness:end.payload.output, text:complete or provider:end content)"
)


class _TextSpec(AssertionSpec):
    text: str = Field(min_length=1)
    case_sensitive: bool = Field(True, alias="caseSensitive")

    def describe(self) -> str:
        return f"{self.type} {self.text!r}"


class OutputContains(_TextSpec):
    """The output contains `text`."""

    type: Literal["output.contains"] = "output.contains"


class OutputNotContains(_TextSpec):
    """The output does not contain `text`."""

    type: Literal["output.notContains"] = "output.notContains"


class OutputMatches(AssertionSpec):
    """The output matches `regex` (searched, with JavaScript-style `flags`, time-bounded)."""

    type: Literal["output.matches"] = "output.matches"
    regex: str = Field(min_length=1)
    flags: str = Field("", description=f"Any of {VALID_FLAGS}.")

    @model_validator(mode="after")
    def _compiles(self) -> OutputMatches:
        BoundedRegex(self.regex, self.flags)
        return self

    def describe(self) -> str:
        return f"{self.type} /{self.regex}/{self.flags}"


class OutputJson(AssertionSpec):
    """The output is JSON (or has a ```json block) valid against `schema` (JSON Schema)."""

    type: Literal["output.json"] = "output.json"
    schema_: dict[str, JSON] = Field(alias="schema")

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, value: dict[str, JSON]) -> dict[str, JSON]:
        import jsonschema  # noqa: PLC0415 - loaded only by suites that use output.json

        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from exc
        return value


class OutputLength(AssertionSpec):
    """The output length in characters is within `min` / `max`."""

    type: Literal["output.length"] = "output.length"
    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> OutputLength:
        if self.min is None and self.max is None:
            raise ValueError("output.length needs `min` or `max`")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"`min` ({self.min}) is above `max` ({self.max})")
        return self


# --- the checks, shared by the incremental leaf (at close) and the reference -----------------


def _contains(spec: _TextSpec, output: str) -> bool:
    if spec.case_sensitive:
        return spec.text in output
    return spec.text.casefold() in output.casefold()


def check_contains(spec: OutputContains, output: str | None) -> Outcome:
    if output is None:
        return Outcome.failed(NO_OUTPUT)
    if _contains(spec, output):
        return Outcome.passed(f"output contains {spec.text!r}")
    return Outcome.failed(f"output does not contain {spec.text!r}: {short(output, 120)}")


def check_not_contains(spec: OutputNotContains, output: str | None) -> Outcome:
    if output is None:
        return Outcome.failed(NO_OUTPUT)
    if _contains(spec, output):
        return Outcome.failed(f"output contains forbidden {spec.text!r}")
    return Outcome.passed(f"output does not contain {spec.text!r}")


def check_matches(spec: OutputMatches, output: str | None) -> Outcome:
    if output is None:
        return Outcome.failed(NO_OUTPUT)
    if compile_regex(spec.regex, spec.flags).search(output):
        return Outcome.passed(f"output matches /{spec.regex}/{spec.flags}")
    return Outcome.failed(f"output does not match /{spec.regex}/{spec.flags}: {short(output, 120)}")


_FENCED = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def parse_json_output(output: str) -> tuple[bool, JSON]:
    try:
        return True, orjson.loads(output)
    except orjson.JSONDecodeError:
        pass
    # Fenced blocks: those tagged json first, then untagged ones, in order of appearance.
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCED.finditer(output)]
    for wanted in ("json", ""):
        for tag, body in blocks:
            if tag == wanted:
                try:
                    return True, orjson.loads(body)
                except orjson.JSONDecodeError:
                    continue
    return False, None


def check_json(spec: OutputJson, output: str | None) -> Outcome:
    if output is None:
        return Outcome.failed(NO_OUTPUT)
    ok, value = parse_json_output(output)
    if not ok:
        return Outcome.failed(f"output is not JSON: {short(output, 120)}")
    import jsonschema  # noqa: PLC0415 - loaded only by suites that use output.json

    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(spec.schema_).iter_errors(value)
    )
    if error is None:
        return Outcome.passed("output is JSON valid against the schema")
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return Outcome.failed(f"output JSON invalid at {where}: {error.message}")


def check_length(spec: OutputLength, output: str | None) -> Outcome:
    if output is None:
        return Outcome.failed(NO_OUTPUT)
    n = len(output)
    ok = (spec.min is None or n >= spec.min) and (spec.max is None or n <= spec.max)
    bounds = f"min {spec.min}, max {spec.max}"
    return (Outcome.passed if ok else Outcome.failed)(f"output length {n} ({bounds})")


_CHECKS: dict[str, Any] = {
    "output.contains": check_contains,
    "output.notContains": check_not_contains,
    "output.matches": check_matches,
    "output.json": check_json,
    "output.length": check_length,
}


class OutputLeaf(Leaf[AssertionSpec]):
    def __init__(self, spec: AssertionSpec) -> None:
        super().__init__(spec, Interest.close_only())
        self.check = _CHECKS[spec.type]

    def finish(self, state: Any, facts: EpisodeFacts) -> Outcome:
        return self.check(self.spec, facts.output())  # type: ignore[no-any-return]


def _build(spec: AssertionSpec, ctx: CompileContext) -> Leaf[Any]:
    return OutputLeaf(spec)


def _reference(spec: AssertionSpec, ep: ReferenceEpisode) -> Outcome:
    return _CHECKS[spec.type](spec, ep.output())  # type: ignore[no-any-return]


TYPES = [
    AssertionType("output.contains", OutputContains, _build, _reference, "output"),
    AssertionType("output.notContains", OutputNotContains, _build, _reference, "output"),
    AssertionType("output.matches", OutputMatches, _build, _reference, "output"),
    AssertionType("output.json", OutputJson, _build, _reference, "output"),
    AssertionType("output.length", OutputLength, _build, _reference, "output"),
]
