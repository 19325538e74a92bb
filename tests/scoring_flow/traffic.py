"""Synthetic traffic of one agent with a latency regression in the middle.

Episodes of agent `support` (variant `v1`) run one tool call and end. Phase by phase their
wall-clock duration is normal (~1 s), then doubled (the injected regression), then normal
again. Nothing else changes: pass rate, cost and tool calls stay the same, so the only
regression the windowed detector may find is `latency_p95_ms`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

START = datetime(2026, 11, 1, tzinfo=UTC)
PHASES = (("normal", 60, 1.0), ("regressed", 45, 2.0), ("recovered", 90, 1.0))

SCORING_YAML = """\
baselines: {mode: none}
regression:
  reference: 30
  guard: 10
  cooldown_ms: 0
  update_interval_ms: 1.0e12
"""

SUITE_YAML = """\
name: support-live
match: {agent_id: support}
defaultAssertions:
  - type: tool.called
    name: lookup
  - type: signal.contains
    pattern: harness:end
"""


def _ts(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def episodes() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(episode id, signals) in time order; each episode starts after the previous one."""
    t = START
    n = 0
    for phase, count, factor in PHASES:
        for _ in range(count):
            episode = f"sup-{n:04d}-{phase}"
            duration_ms = (1000 + (n * 37) % 200) * factor
            signals = [
                ("harness:start", 0.0, {"input": "where is my order?"}),
                ("tool:call", duration_ms * 0.3, {"name": "lookup", "input": {"id": n}}),
                ("tool:result", duration_ms * 0.6, {"name": "lookup", "output": "shipped"}),
                ("harness:end", duration_ms, {"status": "success", "output": "It shipped."}),
            ]
            out = []
            for seq, (name, offset_ms, payload) in enumerate(signals):
                sig: dict[str, Any] = {
                    "id": f"s{n}-{seq}",
                    "episode_id": episode,
                    "name": name,
                    "timestamp": _ts(t + timedelta(milliseconds=offset_ms)),
                    "seq": seq,
                    "payload": payload,
                }
                if seq == 0:
                    sig["attrs"] = {"agent_id": "support", "variant": "v1"}
                out.append(sig)
            yield episode, out
            t += timedelta(milliseconds=duration_ms + 500)
            n += 1


def write(tmp: Path) -> tuple[Path, Path, Path]:
    """Writes signals.jsonl, suite.yaml and scoring.yaml into `tmp`."""
    signals = tmp / "signals.jsonl"
    with signals.open("wb") as out:
        for _, sigs in episodes():
            for sig in sigs:
                out.write(orjson.dumps(sig) + b"\n")
    suite = tmp / "suite.yaml"
    suite.write_text(SUITE_YAML)
    scoring = tmp / "scoring.yaml"
    scoring.write_text(SCORING_YAML)
    return signals, suite, scoring
