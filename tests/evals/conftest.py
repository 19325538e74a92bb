"""Fixtures for the eval-run tests: the example dataset and agent, and small datasets."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from evalstream.assertions.suite_format.suites import Suite, load_suite, parse_suite

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "agent"
AGENT = f"{EXAMPLE / 'support_agent.py'}:run"
HASTY = {"verify_orders": False, "refund_limit": None, "responder_model": "claude-opus-4-1"}
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def example_suite() -> Suite:
    return load_suite(EXAMPLE / "dataset.yaml")


def make_suite(cases: Sequence[Mapping[str, Any]], **top: Any) -> Suite:
    """A dataset in the signal-native spec's format, from Python data (default: one output
    assertion)."""
    return parse_suite({"name": "t", "cases": [dict(c) for c in cases], **top}, "<test>")


@pytest.fixture
def evalstream() -> Run:
    """Runs the installed `evalstream` console script, as a user would."""
    exe = Path(sys.executable).parent / "evalstream"
    assert exe.exists(), "the project is not installed in this environment (make install)"

    def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(exe), *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=120,
            check=False,
        )

    return run
