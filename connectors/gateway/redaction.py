"""Secret redaction before anything is published.

Two rules: a value under a secret-looking key (`authorization`, `x-api-key`, `password`, ...)
is replaced whole; a string that contains a credential pattern (Anthropic/OpenAI keys, bearer
tokens, AWS/GitHub/Slack/Google keys, JWTs, private-key blocks) has the match replaced by
`[REDACTED:<kind>]`. A cheap byte-level pre-filter on the serialised record decides whether the
record needs the walk at all; it is looser than the rules (prefixes only), so it never skips a
record that a rule would change.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

JSON = Any
REDACTED = "[REDACTED]"

SECRET_KEYS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "api_key",
        "apikey",
        "x-evalstream-token",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "access_token",
        "refresh_token",
        "id_token",
        "cookie",
        "set-cookie",
        "private_key",
        "aws_secret_access_key",
    }
)

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic_key", re.compile(r"sk-ant-[A-Za-z0-9_\-]{16,}")),
    ("openai_key", re.compile(r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("bearer", re.compile(r"(?i)bearer\s+[A-Za-z0-9._~+/=\-]{12,}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github_token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("evalstream_token", re.compile(r"\bevs_[A-Za-z0-9_\-]{20,}")),
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
        ),
    ),
)

# Looser than every rule above: any record a rule could change contains one of these. Plain
# substring tests (C speed, ~1 µs a record) instead of one alternation regex (~25 µs).
_EXACT_NEEDLES = (
    b"AKIA",
    b"ASIA",
    b"AIza",
    b"eyJ",
    b"xox",
    b"ghp_",
    b"gho_",
    b"ghu_",
    b"ghs_",
    b"ghr_",
    b"evs_",
)
_FOLDED_NEEDLES = (
    b"sk-",
    b"bearer",
    b"private key",
    b"authori",
    b"api-key",
    b"api_key",
    b"apikey",
    b"_token",
    b"-token",
    b"password",
    b"passwd",
    b"secret",
    b"cookie",
    b"private_key",
)


class Redactor:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def needs_walk(self, serialised: bytes) -> bool:
        for needle in _EXACT_NEEDLES:
            if needle in serialised:
                return True
        folded = serialised.lower()
        for needle in _FOLDED_NEEDLES:  # noqa: SIM110 - a plain loop beats any() + generator here
            if needle in folded:
                return True
        return False

    def redact(self, value: JSON) -> JSON:
        """A redacted copy of a decoded JSON value (the input is left unchanged)."""
        kind = type(value)
        if kind is str:
            return self._text(value)
        if kind is dict:
            out = {}
            for key, child in value.items():
                if isinstance(key, str) and key.lower() in SECRET_KEYS and child is not None:
                    self.counts["secret_key"] += 1
                    out[key] = REDACTED
                else:
                    out[key] = self.redact(child)
            return out
        if kind is list:
            return [self.redact(child) for child in value]
        return value

    def _text(self, text: str) -> str:
        for kind, pattern in PATTERNS:
            if pattern.search(text):
                text, n = pattern.subn(f"[REDACTED:{kind}]", text)
                self.counts[kind] += n
        return text

    def take_counts(self) -> Counter[str]:
        counts, self.counts = self.counts, Counter()
        return counts
