"""The names the command line offers for dataset runs — threshold profiles and report formats —
without the run models behind them, so that `--help` lists them without loading those."""

from __future__ import annotations

# The keys of `profiles.PROFILES`, in the same order (tests/unit/test_eval_choices.py).
PROFILE_NAMES = ("development", "staging", "production", "critical")
REPORT_FORMATS = ("md", "json", "junit", "html")
