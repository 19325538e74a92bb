"""The regression alert rules read metrics the worker really exports, and their unit tests pass."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from evalstream.stream.telemetry.metrics import PipelineMetrics

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "rules" / "regression.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "tests" / "regression_test.yml"


def exported_series_names() -> set[str]:
    metrics = PipelineMetrics(process=False)
    names: set[str] = set()
    for family in metrics.registry.collect():
        names.update(sample.name for sample in family.samples)
        kind = family.type  # a labelled family without children has no samples yet
        if kind == "gauge":
            names.add(family.name)
        elif kind == "counter":
            names.add(f"{family.name}_total")
        elif kind == "histogram":
            names.update(f"{family.name}_{s}" for s in ("bucket", "sum", "count"))
    return names


def test_every_metric_in_the_rules_is_exported() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    used = {
        name
        for group in groups
        for rule in group["rules"]
        for name in re.findall(r"\bevalstream_[a-z_]+", rule["expr"])
    }
    assert used, "no evalstream metric found in the rules"
    assert used <= exported_series_names(), used - exported_series_names()


def test_promtool_unit_tests_pass() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed: run scripts/system-deps.sh")
    proc = subprocess.run(
        [promtool, "test", "rules", str(RULE_TESTS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
