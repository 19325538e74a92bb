"""Regular expressions from suites, run with a time bound.

Suites come from users and outputs come from models: a pathological pattern on a huge output
must yield an `error` verdict, not hang the worker. The `regex` module enforces a timeout
inside the matcher, so the bound holds without threads or signals.
"""

from __future__ import annotations

import functools

import regex

from evalstream.assertions.errors import RegexTimeoutError

DEFAULT_TIMEOUT_S = 0.25

# JavaScript-style flags as written in signal-native suites; `g` and `u` change nothing for a
# search.
_FLAGS = {
    "i": regex.IGNORECASE,
    "m": regex.MULTILINE,
    "s": regex.DOTALL,
    "x": regex.VERBOSE,
    "u": 0,
    "g": 0,
}
VALID_FLAGS = "".join(_FLAGS)


MEMO_TEXT_CHARS = 256  # short texts (tool arguments, names) repeat: their results are kept
MEMO_ENTRIES = 512


class BoundedRegex:
    __slots__ = ("_compiled", "_memo", "flags", "source", "timeout_s")

    def __init__(
        self,
        source: str,
        flags: str = "",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        memo: bool = False,
    ) -> None:
        bits = regex.V0
        for flag in flags:
            if flag not in _FLAGS:
                raise ValueError(
                    f"unknown regex flag {flag!r} in {flags!r}; valid flags: {VALID_FLAGS}"
                )
            bits |= _FLAGS[flag]
        try:
            self._compiled = regex.compile(source, bits)
        except regex.error as exc:
            raise ValueError(f"regex {source!r} does not compile: {exc}") from exc
        self.source = source
        self.flags = flags
        self.timeout_s = timeout_s
        # `memo`: a search is a pure function of its text, and one with a timeout costs ~4 µs
        # even on a short text; payload matchers see the same short values (tool arguments,
        # names) again and again, so their results for short texts are remembered.
        self._memo: dict[str, bool] | None = {} if memo else None

    def search(self, text: str) -> bool:
        memo = self._memo
        if memo is not None:
            found = memo.get(text)
            if found is not None:
                return found
        try:
            found = self._compiled.search(text, timeout=self.timeout_s) is not None
        except TimeoutError as exc:
            raise RegexTimeoutError(
                f"regex {self.source!r} exceeded its {self.timeout_s:g}s bound on a "
                f"{len(text)}-character input"
            ) from exc
        if memo is not None and len(text) <= MEMO_TEXT_CHARS:
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            memo[text] = found
        return found


@functools.lru_cache(maxsize=1024)
def compile_regex(source: str, flags: str = "", *, memo: bool = False) -> BoundedRegex:
    return BoundedRegex(source, flags, memo=memo)
