from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def evalstream() -> Run:
    """Runs the installed `evalstream` console script, as a user would."""
    exe = Path(sys.executable).parent / "evalstream"
    assert exe.exists(), "the project is not installed in this environment (make install)"

    def run(
        *args: str, stdin: str | None = None, cwd: Path = REPO
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(exe), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=120,
            check=False,
        )

    return run
