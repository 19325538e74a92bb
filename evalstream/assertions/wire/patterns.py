"""Glob patterns over colon-namespaced signal names.

`*` matches within one `:`-segment (possibly empty), `**` matches anything including `:`,
and every other character is literal (`error.*` matches `error.api`, not `errorXapi`).
"""

from __future__ import annotations

import functools
import re


class Pattern:
    """A compiled glob. `literal` is set when the pattern has no wildcard (fast equality)."""

    __slots__ = ("_regex", "literal", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        if "*" not in source:
            self.literal: str | None = source
            self._regex: re.Pattern[str] | None = None
        else:
            self.literal = None
            self._regex = re.compile(_glob_to_regex(source), re.DOTALL)

    def matches(self, name: str) -> bool:
        if self.literal is not None:
            return name == self.literal
        assert self._regex is not None
        return self._regex.fullmatch(name) is not None

    def __repr__(self) -> str:
        return f"Pattern({self.source!r})"


def _glob_to_regex(source: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(source):
        if source.startswith("**", i):
            out.append(".*")
            i += 2
        elif source[i] == "*":
            out.append("[^:]*")
            i += 1
        else:
            out.append(re.escape(source[i]))
            i += 1
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def compile_pattern(source: str) -> Pattern:
    """Compile once; suites reuse the same patterns across assertions and episodes."""
    return Pattern(source)
