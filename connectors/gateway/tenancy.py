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

JSON = Any


@dataclass(frozen=True, slots=True)
class Caller:
    tenant: str | None

    def episode(self, episode_id: str) -> str:
        return f"{self.tenant}/{episode_id}" if self.tenant is not None else episode_id

    def stamp(self, record: dict[str, JSON], episode_id: str) -> str:
        """Scope `episode_id`, write it and the tenant into `record`; returns the key."""
        scoped = self.episode(episode_id)
        record["episode_id"] = scoped
        attrs = record.get("attrs")
        if self.tenant is not None:
            attrs = dict(attrs) if isinstance(attrs, dict) else {}
            attrs["tenant"] = self.tenant
            record["attrs"] = attrs
        elif isinstance(attrs, dict) and "tenant" in attrs:
            record["attrs"] = {k: v for k, v in attrs.items() if k != "tenant"}
        return scoped
