"""Gateway settings: defaults < config file (YAML) < environment (EVALSTREAM_GATEWAY_*) < flags."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evalstream.connectors.layered_settings import load_layered

JSON = Any
ENV_PREFIX = "EVALSTREAM_GATEWAY_"
# Shared with the worker, so one environment configures both.
SHARED_ENV = {"broker": "EVALSTREAM_BROKER", "topic_prefix": "EVALSTREAM_TOPIC_PREFIX"}


class GatewaySettings(BaseModel):
    """Everything `evalstream gateway` and `create_gateway_app` need; every field documented."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field("127.0.0.1", description="Interface to listen on.")
    port: int = Field(8788, ge=0, le=65535, description="HTTP port (0 picks a free one).")
    broker: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers.")
    topic_prefix: str = Field("evalstream.", description="Prefix of the topic names.")
    tokens_file: str | None = Field(
        None, description="YAML file mapping tenants to token hashes (see docs/gateway.md)."
    )
    tokens: str | None = Field(
        None,
        description="tenant:token pairs, comma-separated (hashed at load, never kept in clear).",
    )
    allow_anonymous: bool = Field(
        False, description="Accept requests without a token (no tenant; local use only)."
    )
    max_body_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, description="Largest request body, also after decompression."
    )
    max_signals: int = Field(10_000, ge=1, description="Most signals/records per request.")
    max_depth: int = Field(32, ge=2, le=512, description="Deepest JSON nesting accepted.")
    max_string_length: int = Field(
        256 * 1024, ge=64, description="Longest JSON string (characters) accepted."
    )
    publish_timeout_s: float = Field(
        5.0, gt=0, description="Longest wait for the broker's acknowledgement before 503."
    )
    buffer_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Unacknowledged bytes held before 503."
    )
    retry_after_s: int = Field(2, ge=1, description="Retry-After of a 503.")
    anthropic_upstream: str = Field(
        "https://api.anthropic.com", description="Where the recording proxy forwards calls."
    )
    upstream_timeout_s: float = Field(600.0, gt=0, description="Timeout of an upstream call.")
    pricing: str | None = Field(None, description="Pricing table JSON (costs of proxied calls).")
    redact: bool = Field(True, description="Redact secrets before publishing.")

    def topic(self, stream: str) -> str:
        return f"{self.topic_prefix}{stream}"


def _from_env(env: Mapping[str, str]) -> dict[str, JSON]:
    out: dict[str, JSON] = {}
    for name in GatewaySettings.model_fields:
        shared = SHARED_ENV.get(name)
        if shared is not None and shared in env:
            out[name] = env[shared]
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is not None:
            out[name] = raw
    return out


def load_gateway_settings(
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, JSON] | None = None,
) -> GatewaySettings:
    return load_layered(
        GatewaySettings,
        "gateway",
        config_file,
        env_values=_from_env(env or {}),
        env_prefix=ENV_PREFIX,
        overrides=overrides,
    )
