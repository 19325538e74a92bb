"""The JSON Schema of the suite format, with every registered assertion type (for editors)."""

from __future__ import annotations

from typing import Any

from evalstream.assertions.evaluation.registry import all_types
from evalstream.assertions.suite_format.suites import Suite

JSON = Any
_COMPOSITES = {"all", "any", "not"}


def _assertion_schema(name: str, defs: dict[str, JSON]) -> dict[str, JSON]:
    if name in _COMPOSITES:
        ref = {"$ref": "#/$defs/AssertionSpec"}
        if name == "not":
            props: dict[str, JSON] = {"assertion": ref}
        else:
            props = {"assertions": {"type": "array", "minItems": 1, "items": ref}}
        return {
            "title": name,
            "type": "object",
            "properties": {"type": {"const": name}, **props},
            "required": ["type", *props],
            "additionalProperties": False,
        }
    model = all_types()[name].spec
    schema = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    defs.update(schema.pop("$defs", {}))
    schema["properties"]["type"] = {"const": name}
    schema["required"] = sorted({*schema.get("required", []), "type"})
    schema["title"] = name
    schema["additionalProperties"] = False
    return dict(schema)


def suite_json_schema() -> dict[str, JSON]:
    schema = Suite.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    defs: dict[str, JSON] = schema.setdefault("$defs", {})
    schema["properties"].pop("source", None)
    variants = [_assertion_schema(name, defs) for name in sorted(all_types())]
    defs["AssertionSpec"] = {
        "title": "Assertion",
        "description": "One assertion; `type` selects its fields.",
        "oneOf": variants,
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "evalstream suite"
    return dict(schema)
