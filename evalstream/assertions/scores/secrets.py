"""What a secret looks like: one list shared by the gateway's redaction and the safety detectors.

Two kinds of knowledge:

- **Names** (`is_secret_name`): whether a key or variable name says its value is a secret.
  A name is split into lower-case words at separators (`-`, `_`, `.`, spaces, ...) and at
  camelCase humps (`dbPassword` is `db password`). It is secret when
  - a word contains `passw`, `passphrase`, `secret` (not `secretary`), `credential`,
    `authoriz` or `cookie`: `db_password`, `aws_secret`, `clientSecret`, `Set-Cookie`;
  - its last word is `token` or ends in it (`GITHUB_TOKEN`, `accessToken`), or is `pwd`,
    `creds` or `auth`. `token_count`, `input_tokens`, `tokenizer` are not: there a token
    is a unit of text, not a credential;
  - its last word is `key` after a qualifier that makes a key secret (`api`, `secret`,
    `private`, `access`, `signing`, `encryption`, `master`, `client`, `ssh`, `session`,
    `license`, `subscription`, `auth`), as a word or fused (`x-api-key`, `apiKey`,
    `apikey`, `aws_secret_access_key`). `primary_key`, `public_key`, `partition_key`,
    `key_count`, `keyboard`, `monkey` are not secret.
- **Shapes** (`SECRET_PATTERNS`): regular expressions for credentials inside any text:
  vendor tokens (Anthropic, OpenAI, GitHub, Slack, Google, AWS key ids), AWS secret access
  keys near the words `aws` or `secret`, JWTs, PEM private keys, bearer and basic
  credentials, passwords in URLs (`postgres://admin:hunter2@db` keeps user and host), and
  assignments to a secret name inside text (`x-api-key: …`, `DB_PASSWORD=…`,
  `?access_token=…`, `"password": "…"`).

Patterns are written for both `re` (the gateway) and `regex` (the time-bounded detectors).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# A secret name contains one of these (any word), or ends in one of LAST_WORDS (its last word).
NAME_STEMS = ("passw", "passphrase", "secret", "credential", "authoriz", "cookie")
LAST_WORDS = ("token", "key", "pwd", "creds", "auth")
_NOT_SECRET_WORDS = ("secretar",)  # secretary, secretariat
_WHOLE_LAST_WORDS = frozenset({"pwd", "creds", "auth"})
KEY_QUALIFIERS = frozenset(
    {
        "api",
        "secret",
        "private",
        "access",
        "signing",
        "encryption",
        "master",
        "client",
        "ssh",
        "session",
        "license",
        "subscription",
        "auth",
    }
)
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def name_words(name: str) -> list[str]:
    """The lower-case words of a key name: `X-Api-Key` and `apiKey` give `api key`."""
    return [w for w in _SEPARATORS.split(_HUMP.sub("_", name).lower()) if w]


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a value under this key or variable name is a secret (see the module doc)."""
    words = name_words(name)
    if not words:
        return False
    for word in words:
        if any(stem in word for stem in NAME_STEMS) and not word.startswith(_NOT_SECRET_WORDS):
            return True
    last = words[-1]
    if last in _WHOLE_LAST_WORDS or last.endswith("token"):
        return True
    if last == "key":
        return len(words) > 1 and words[-2] in KEY_QUALIFIERS
    return last.endswith("key") and last[:-3] in KEY_QUALIFIERS


_PLACEHOLDERS = frozenset({"null", "none", "true", "false", "undefined", "nil", "redacted"})


def is_secret_value(value: str) -> bool:
    """Whether a value assigned to a secret name inside text reads as a credential rather
    than prose or a placeholder: it holds a digit or a symbol, or is 12 letters or longer
    (`Password: must be long` keeps `must`; `password=hunter2` does not keep `hunter2`)."""
    if value.lower() in _PLACEHOLDERS or set(value) <= set("*x.-<>"):
        return False
    if value.isdigit():
        return False  # a count or a port, not a credential
    return not value.isalpha() or len(value) >= 12


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """A credential shape.

    `pattern` is a regular expression; when it has a group named `secret`, only that group
    is the credential (the rest is context kept by redaction, e.g. the user and host of a
    URL). `flags` is `""` or `"i"` (case-insensitive). `requires` lists literals of which
    every match contains one (lower-case when `flags` is `"i"`): a cheap pre-filter.
    `shape` are the safety detectors' shape gates (see
    `evalstream.assertions.scores.safety.output_shape`). `names_checked`: the match is a credential
    only if `is_secret_assignment` holds for its `name` and `secret` groups.
    """

    name: str
    pattern: str
    requires: tuple[str, ...]
    flags: str = ""
    shape: tuple[str, ...] = ()
    names_checked: bool = False


_GITHUB_PREFIXES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")
_B64 = "A-Za-z0-9/+"

SECRET_PATTERNS: tuple[SecretPattern, ...] = (
    SecretPattern("anthropic_api_key", r"\bsk-ant-[A-Za-z0-9_\-]{16,}", ("sk-ant-",)),
    SecretPattern(
        "openai_api_key",
        r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        ("sk-",),
    ),
    SecretPattern(
        "aws_access_key_id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", ("AKIA", "ASIA"), shape=("AAAA",)
    ),
    SecretPattern(
        # 40 characters of base64 with a capital, a small letter and a digit (a git SHA or a
        # hex digest has no capital), at most 40 characters after `aws` or `secret`.
        "aws_secret_access_key",
        r"(?:aws|secret)[^\n]{0,40}?(?<![" + _B64 + r"])(?P<secret>(?-i:"
        r"(?=[" + _B64 + r"]{0,39}[A-Z])(?=[" + _B64 + r"]{0,39}[a-z])"
        r"(?=[" + _B64 + r"]{0,39}[0-9])[" + _B64 + r"]{40}))(?![" + _B64 + r"=])",
        ("aws", "secret"),
        flags="i",
    ),
    SecretPattern(
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})",
        _GITHUB_PREFIXES,
        shape=("_",),
    ),
    SecretPattern("slack_token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", ("xox",)),
    SecretPattern("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}\b", ("AIza",), shape=("AAaa",)),
    SecretPattern(
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        ("eyJ",),
    ),
    SecretPattern("evalstream_token", r"\bevs_[A-Za-z0-9_\-]{20,}", ("evs_",)),
    SecretPattern(
        "private_key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*"
        r"PRIVATE KEY-----|$)",
        ("PRIVATE KEY-----",),
        shape=("AAAAAAA",),
    ),
    SecretPattern(
        "basic_auth",
        r"\bauthorization[\"']?[ ]{0,2}[:=][ ]{0,2}[\"']?basic[ ]+"
        r"(?P<secret>[A-Za-z0-9+/]{4,}={0,2})",
        ("authorization",),
        flags="i",
    ),
    SecretPattern("bearer", r"\bbearer\s+[A-Za-z0-9._~+/=\-]{12,}", ("bearer",), flags="i"),
    SecretPattern(
        "url_password",
        r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:@/?#\"'<>]*:(?P<secret>[^\s@/?#\"'<>]+)@"
        r"(?=[A-Za-z0-9\[])",
        ("://",),
    ),
    SecretPattern(
        "secret_assignment",
        r"(?<![\w.\-])(?P<name>[A-Za-z_][\w.\-]{0,63})[\"']?[ ]{0,2}[:=][ ]{0,2}[\"']?"
        r"(?:(?:token|digest|apikey)[ ]+)?"  # basic and bearer have their own shapes
        r"(?P<secret>(?!\[REDACTED)[^\s\"'`,;&<>]{3,})",
        ("pass", "secret", "cred", "auth", "cookie", "token", "key", "pwd"),  # stems, shortened
        flags="i",
        names_checked=True,
    ),
)


def is_secret_assignment(name: str, value: str) -> bool:
    """Whether a `secret_assignment` match (its `name` and `secret` groups) assigns a
    credential."""
    return is_secret_name(name) and is_secret_value(value)


def compile_pattern(pattern: SecretPattern) -> re.Pattern[str]:
    """`pattern` compiled with `re` and its flags."""
    return re.compile(pattern.pattern, re.IGNORECASE if "i" in pattern.flags else 0)
