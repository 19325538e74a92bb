"""The CI gate of an eval-harness suite: thresholds on the report's metrics.

A suite's `eval_trigger` block (inside `eval_suite:` or beside it) sets them:

    eval_trigger:
      pass_at_1: 0.85        # or under `thresholds:`
      pass_hat_3: 0.70
      on_failure: block      # block (exit 1) | warn (report only)
      report_path: eval-results/report.md

Metric names are `pass_rate`, `pass_at_K` and `pass_hat_K`; each threshold is a minimum in
[0, 1]. Other keys (when the trigger runs, say) are kept and not used here. A metric that no
item can support (null: too few attempts) fails its threshold: a gate must not pass vacuously.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

JSON = Any
OnFailure = Literal["block", "warn"]
METRIC = re.compile(r"pass_rate|pass_(?:at|hat)_([1-9][0-9]*)")
METRIC_FORMS = "pass_rate, pass_at_K or pass_hat_K (K a positive integer, e.g. pass_at_1)"


def check_metric_name(name: str) -> None:
    if not METRIC.fullmatch(name):
        raise ValueError(f"unknown metric {name!r}; thresholds name {METRIC_FORMS}")


def check_threshold(name: str, value: JSON) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"threshold {name}: {value!r} is not a number between 0 and 1")
    return float(value)


def metric_k(name: str) -> int | None:
    """The k of `pass_at_K` / `pass_hat_K`; None for `pass_rate`."""
    found = METRIC.fullmatch(name)
    return int(found.group(1)) if found and found.group(1) else None


class EvalTrigger(BaseModel):
    """The `eval_trigger` block. Metric keys at the top level or under `thresholds:`."""

    model_config = ConfigDict(frozen=True, extra="allow")

    thresholds: dict[str, float] = Field(default_factory=dict)
    on_failure: OnFailure = "block"
    report_path: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _collect(cls, data: JSON) -> JSON:
        if not isinstance(data, Mapping):
            return data
        nested = data.get("thresholds") or {}
        if not isinstance(nested, Mapping):
            raise ValueError("`thresholds` must be a mapping of metric: minimum")
        found = dict(nested)
        rest: dict[str, JSON] = {}
        for key, value in data.items():
            if key == "thresholds":
                continue
            if isinstance(key, str) and key.startswith("pass"):
                found[key] = value
            else:
                rest[key] = value
        for name, value in found.items():
            check_metric_name(str(name))
            check_threshold(str(name), value)
        return {**rest, "thresholds": found}


def parse_threshold_flag(text: str) -> tuple[str, float]:
    """`pass_at_1=0.85` as (metric, minimum); ValueError naming the fix."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"--threshold {text!r}: expected METRIC=MINIMUM, e.g. pass_at_1=0.85")
    check_metric_name(name)
    try:
        value = float(raw)
    except ValueError as exc:
        raise ValueError(f"--threshold {text!r}: {raw!r} is not a number") from exc
    return name, check_threshold(name, value)


@dataclass(frozen=True)
class ThresholdRow:
    metric: str
    value: float | None
    threshold: float
    passed: bool
    note: str = ""

    def to_json(self) -> dict[str, JSON]:
        return {
            "metric": self.metric,
            "value": self.value,
            "threshold": self.threshold,
            "passed": self.passed,
            "note": self.note,
        }


@dataclass(frozen=True)
class GateResult:
    rows: list[ThresholdRow] = field(default_factory=list)
    on_failure: OnFailure = "block"

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows)

    @property
    def blocking(self) -> bool:
        """The gate failed and the suite says to block (exit 1)."""
        return not self.passed and self.on_failure == "block"

    def to_json(self) -> dict[str, JSON]:
        return {
            "passed": self.passed,
            "blocking": self.blocking,
            "on_failure": self.on_failure,
            "rows": [row.to_json() for row in self.rows],
        }


def ks_needed(thresholds: Mapping[str, float], attempts: int) -> list[int]:
    """The k values the report must compute: those the thresholds name, and the attempts."""
    ks = {
        k
        for name in thresholds
        if (k := metric_k(name)) is not None and (k > 1 or name == "pass_hat_1")
    }
    if attempts > 1:
        ks.add(attempts)
    return sorted(ks) or [3]


def evaluate_gate(
    report: Mapping[str, JSON],
    thresholds: Mapping[str, float],
    on_failure: OnFailure = "block",
) -> GateResult:
    """Each threshold against the report's metrics (`pass_rate` from its summary)."""
    r = report["eval_report"]
    coverage: Mapping[str, JSON] = r.get("metrics_coverage", {})
    rows: list[ThresholdRow] = []
    for name, minimum in sorted(thresholds.items()):
        value = r["summary"]["pass_rate"] if name == "pass_rate" else r["metrics"].get(name)
        note = ""
        if value is None:
            k = metric_k(name)
            note = (
                f"undefined: no item has {k} or more attempts; run with --attempts {k}"
                if k is not None and k > 1
                else "undefined: no item was graded"
            )
        else:
            left_out = coverage.get(name, {}).get("excluded_fewer_than_k_attempts", 0)
            if left_out:
                note = f"{left_out} items with fewer than {metric_k(name)} attempts left out"
        passed = value is not None and value >= minimum
        rows.append(ThresholdRow(name, value, minimum, passed, note))
    return GateResult(rows, on_failure)


def gate_lines(gate: GateResult) -> Sequence[str]:
    """The gate as terminal lines."""
    lines = []
    for row in gate.rows:
        value = "undefined" if row.value is None else f"{row.value:.3f}"
        verdict = "pass" if row.passed else "FAIL"
        note = f" ({row.note})" if row.note else ""
        lines.append(f"  {row.metric}: {value} vs minimum {row.threshold:g} -> {verdict}{note}")
    return lines
