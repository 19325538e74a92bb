"""Worker settings: defaults < config file (YAML) < environment (EVALSTREAM_*) < CLI flags."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalstream.assertions.evaluation.assembly import CloseRules
from evalstream.connectors.layered_settings import load_layered

JSON = Any
ENV_PREFIX = "EVALSTREAM_"
TOPIC_NAMES = (
    "signals",
    "llm-calls",
    "verdicts",
    "episodes",
    "alerts",
    "dlq",
    "observations",  # internal: scored episodes keyed by agent/variant, for regression windows
    "baselines",  # internal, compacted: rolling baselines keyed by baseline key
    "closed",  # internal, compacted: closed-episode markers, in their signals' partition
)
COMPACTED_TOPICS = ("baselines", "closed")
# Stamped by the broker on arrival: the worker's clock, which no producer's clock can move.
LOG_APPEND_TIME_TOPICS = ("signals",)


class WorkerSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    broker: str = Field(
        "127.0.0.1:9092", description="Kafka bootstrap servers, host:port[,host:port]."
    )
    app_id: str = Field(
        "evalstream",
        description="Consumer group of the signals topic; faust's app id is `<app_id>-agents`.",
    )
    topic_prefix: str = Field("evalstream.", description="Prefix of every topic name.")
    partitions: int = Field(8, ge=1, description="Partitions of every evalstream topic.")
    replication_factor: int = Field(1, ge=1)
    suites: list[str] = Field(default_factory=list, description="Suite YAML files.")
    pricing: str | None = Field(None, description="Pricing table JSON overriding the built-in.")
    scoring: str | None = Field(
        None, description="Scoring settings YAML: score episodes, alert on regressions."
    )
    nightly: str | None = Field(
        None, description="Nightly sweep settings YAML: run it on the leader worker by cron."
    )
    nightly_cron: str = Field("0 3 * * *", description="When the leader runs the nightly sweep.")
    end_patterns: list[str] = Field(default_factory=lambda: ["harness:end"])
    grace_ms: float = Field(2_000.0, ge=0)
    inactivity_ms: float = Field(300_000.0, gt=0)
    max_duration_ms: float | None = Field(6 * 3_600_000.0, gt=0)
    max_signals: int | None = Field(1_000_000, ge=1)
    reorder_ms: float = Field(0.0, ge=0)
    # Often: a sweep looks only at episodes in their grace period until one can time out
    # (EpisodeAssembler.due), and closes decided together arrive together, in a burst that
    # every signal behind them waits for.
    sweep_interval_s: float = Field(
        0.1, gt=0, description="How often each worker sweeps its episodes."
    )
    max_message_bytes: int = Field(1_048_576, ge=1024)
    full_gc_interval_s: float = Field(
        300.0,
        ge=0,
        description="Full garbage collections run every this many seconds instead of "
        "CPython's schedule, which paused a busy worker for 15-70 ms every few seconds "
        "(evalstream/stream/kafka_worker/gc_schedule.py); 0 keeps CPython's.",
    )
    recovery_timeout_s: float = Field(
        60.0, gt=0, description="A rebalance/recovery stuck this long crashes the worker."
    )
    prune_interval_s: float = Field(60.0, gt=0, description="How often stale markers are pruned.")
    marker_retention_s: float = Field(
        3_600.0, ge=0, description="How long after max_duration a closed-episode marker is kept."
    )
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(9464, ge=0, le=65535)
    data_dir: str = Field(".evalstream", description="The worker's local state (faust's).")
    otlp_endpoint: str | None = Field(
        None,
        description="Export verdicts and scores as OpenTelemetry evaluation events to this "
        "OTLP/HTTP endpoint (OTEL_EXPORTER_OTLP_* settings apply; this wins over their endpoint).",
    )
    otlp_mode: Literal["logs", "spans"] | None = Field(
        None, description="OTLP export as log records (logs, the default) or child spans."
    )

    def topic(self, name: str) -> str:
        if name not in TOPIC_NAMES:
            raise KeyError(name)
        return f"{self.topic_prefix}{name}"

    def close_rules(self) -> CloseRules:
        return CloseRules(
            end_patterns=tuple(self.end_patterns),
            grace_ms=self.grace_ms,
            inactivity_ms=self.inactivity_ms,
            max_duration_ms=self.max_duration_ms,
            max_signals=self.max_signals,
            reorder_ms=self.reorder_ms,
        )


_LIST_FIELDS = {"suites", "end_patterns"}


def _from_env(env: Mapping[str, str]) -> dict[str, JSON]:
    out: dict[str, JSON] = {}
    for name in WorkerSettings.model_fields:
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is None:
            continue
        out[name] = [part for part in raw.split(",") if part] if name in _LIST_FIELDS else raw
    return out


def load_settings(
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, JSON] | None = None,
) -> WorkerSettings:
    return load_layered(
        WorkerSettings,
        "worker",
        config_file,
        env_values=_from_env(env or {}),
        env_prefix=ENV_PREFIX,
        overrides=overrides,
    )
