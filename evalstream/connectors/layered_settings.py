"""Settings in layers: a YAML file, then environment variables, then explicit overrides.

The worker's and the gateway's settings load the same way; each parses its own environment
variables (names, list fields, shared variables) and hands them over as a dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from evalstream.assertions.errors import InputError

JSON = Any
Model = TypeVar("Model", bound=BaseModel)


def load_layered(
    model: type[Model],
    what: str,
    config_file: str | Path | None,
    *,
    env_values: Mapping[str, JSON],
    env_prefix: str,
    overrides: Mapping[str, JSON] | None,
) -> Model:
    """`what` names the settings in errors ("worker", "gateway"); a None override is unset."""
    data: dict[str, JSON] = {}
    if config_file is not None:
        path = Path(config_file)
        try:
            loaded = yaml.safe_load(path.read_text("utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"{path}: cannot read {what} config: {exc}") from exc
        if not isinstance(loaded, dict):
            raise InputError(f"{path}: the {what} config must be a mapping of settings")
        data.update(loaded)
    data.update(env_values)
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        origin = f" (from {config_file} or {env_prefix}{field.upper()})" if field else ""
        valid = ", ".join(model.model_fields)
        hint = f"; valid settings: {valid}" if err["type"] == "extra_forbidden" else ""
        raise InputError(f"{what} setting {field!r}{origin}: {err['msg']}{hint}") from exc
