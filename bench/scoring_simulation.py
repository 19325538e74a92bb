#!/usr/bin/env python3
"""The alerting simulation's table (docs/scoring.md): false firings, detection delays and
events per regression on seeded traffic scored through the `evalstream score` path.

    PYTHONPATH=. .venv/bin/python bench/scoring_simulation.py [--seeds 10] [--quiet-episodes 6000]

The simulation lives in tests/support/scoring_simulation.py, where the tests that assert the
alerting targets use it too.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package

from tests.support.scoring_simulation import main

if __name__ == "__main__":
    sys.exit(main())
