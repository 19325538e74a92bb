"""The base of every assertion spec: a frozen pydantic model whose fields are its configuration."""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

import orjson
from pydantic import BaseModel, ConfigDict


class AssertionSpec(BaseModel):
    """One assertion as written in a suite. Subclasses fix `type` with a Literal."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    type: str
    # Bump when a type's semantics change, so results of two rule versions never mix.
    RULE_VERSION: ClassVar[int] = 1

    def wire(self) -> dict[str, Any]:
        """The spec as written (aliases; fields that were set, explicit nulls included)."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")

    def rule_id(self) -> str:
        """A stable id of this exact rule and its semantics version."""
        canonical = orjson.dumps(
            {"spec": self.wire(), "v": self.RULE_VERSION}, option=orjson.OPT_SORT_KEYS
        )
        return hashlib.blake2b(canonical, digest_size=6).hexdigest()

    def describe(self) -> str:
        """A short human label, e.g. `signal.not error:*`."""
        return self.type
