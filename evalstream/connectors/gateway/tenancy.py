"""Tenant stamping: the server, never the payload, says whose data a record is.

With authentication on, every record gets `attrs.tenant` = the token's tenant (a `tenant`
sent by the client is overwritten) and its episode id is scoped as `<tenant>/<episode id>`;
the Kafka key is that scoped id. Two tenants using the same episode id therefore land in two
different episodes, and no request can name another tenant's episode: its ids always start
with its own tenant. Without authentication (`allow_anonymous`, local use) there is no tenant:
episode ids are kept and a client-sent `attrs.tenant` is removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalstream.assertions.wire.limits import check_text

JSON = Any


@dataclass(frozen=True, slots=True)
class Caller:
    tenant: str | None

    def episode(self, episode_id: str) -> str:
        return f"{self.tenant}/{episode_id}" if self.tenant is not None else episode_id

    def stamp(self, record: dict[str, JSON], episode_id: str) -> str:
        """Scope `episode_id`, write it and the tenant into `record`; returns the key.
        Raises SignalDecodeError when the scoped id is over the id limit (a consumer would
        reject it: the gateway refuses it first)."""
        scoped = self.episode(episode_id)
        if scoped is not episode_id:
            check_text(scoped, f"`episode_id` with its tenant prefix {self.tenant!r}")
        record["episode_id"] = scoped
        attrs = record.get("attrs")
        if self.tenant is not None:
            attrs = dict(attrs) if isinstance(attrs, dict) else {}
            attrs["tenant"] = self.tenant
            record["attrs"] = attrs
        elif isinstance(attrs, dict) and "tenant" in attrs:
            record["attrs"] = {k: v for k, v in attrs.items() if k != "tenant"}
        return scoped
