"""Bearer tokens -> tenants. Tokens are kept only as SHA-256 digests and compared in constant
time against every known digest (no early exit, so timing reveals neither match nor position).

Tokens are long random strings (`evalstream gateway-token` makes 256-bit ones), so an unsalted
SHA-256 digest is enough: it cannot be brute-forced, and a leaked tokens file reveals no token.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from evalstream.assertions.errors import InputError

TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
HASH_PREFIX = "sha256:"


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def new_token() -> str:
    return "evs_" + secrets.token_urlsafe(32)


def stored_form(token: str) -> str:
    """What a tokens file holds for a token."""
    return HASH_PREFIX + token_digest(token).hex()


@dataclass(frozen=True, slots=True)
class Credential:
    tenant: str
    digest: bytes


class TokenStore:
    def __init__(self, credentials: Iterable[Credential] = ()) -> None:
        self._credentials = tuple(credentials)

    def __len__(self) -> int:
        return len(self._credentials)

    def tenant_for(self, token: str) -> str | None:
        digest = token_digest(token)
        found: str | None = None
        for cred in self._credentials:
            if hmac.compare_digest(cred.digest, digest):
                found = cred.tenant
        return found

    @classmethod
    def load(cls, tokens_file: str | None, tokens: str | None) -> TokenStore:
        creds: list[Credential] = []
        if tokens_file:
            creds.extend(_from_file(Path(tokens_file)))
        if tokens:
            for pair in tokens.split(","):
                if not pair.strip():
                    continue
                tenant, sep, token = pair.strip().partition(":")
                if not sep or not token:
                    raise InputError(
                        f"gateway tokens: {tenant!r} is not tenant:token "
                        "(e.g. EVALSTREAM_GATEWAY_TOKENS=acme:evs_...)"
                    )
                creds.append(_credential(tenant, token, "EVALSTREAM_GATEWAY_TOKENS"))
        return cls(creds)


def _credential(tenant: str, entry: str, origin: str) -> Credential:
    if not TENANT_RE.match(tenant):
        raise InputError(
            f"{origin}: tenant {tenant!r} must be 1-64 characters of letters, digits, . _ - "
            "and start with a letter or digit"
        )
    if entry.startswith(HASH_PREFIX):
        hexdigest = entry[len(HASH_PREFIX) :]
        try:
            digest = bytes.fromhex(hexdigest)
        except ValueError:
            digest = b""
        if len(digest) != 32:
            raise InputError(
                f"{origin}: tenant {tenant!r}: {entry[:16]}... is not sha256:<64 hex digits>"
            )
        return Credential(tenant, digest)
    if len(entry) < 16:
        raise InputError(
            f"{origin}: tenant {tenant!r}: tokens must be at least 16 characters "
            "(make one with `evalstream gateway-token`)"
        )
    return Credential(tenant, token_digest(entry))


def _from_file(path: Path) -> list[Credential]:
    try:
        data = yaml.safe_load(path.read_text("utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: cannot read tokens file: {exc}") from exc
    tenants = data.get("tenants") if isinstance(data, dict) else None
    if not isinstance(tenants, dict):
        raise InputError(
            f"{path}: expected `tenants:` mapping each tenant to a list of sha256:<hex> entries"
        )
    creds: list[Credential] = []
    for tenant, entries in tenants.items():
        listed = [entries] if isinstance(entries, str) else entries
        if not isinstance(listed, list) or not all(isinstance(e, str) for e in listed):
            raise InputError(f"{path}: tenant {tenant!r}: expected a list of token hashes")
        creds.extend(_credential(str(tenant), entry, str(path)) for entry in listed)
    return creds
