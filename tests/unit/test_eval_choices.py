"""The names the command line offers for dataset runs (evalstream/assertions/evalruns/choices.py)
are those the run code knows: every profile resolves, every report format renders."""

from __future__ import annotations

import pytest

from evalstream.assertions.evalruns.choices import PROFILE_NAMES, REPORT_FORMATS
from evalstream.assertions.evalruns.profiles import PROFILES, profile
from evalstream.assertions.evalruns.reports import render_eval_report
from tests.evals.factories import run_of


def test_profile_names_are_the_threshold_profiles() -> None:
    assert tuple(PROFILES) == PROFILE_NAMES
    assert [profile(name).name for name in PROFILE_NAMES] == list(PROFILE_NAMES)


@pytest.mark.parametrize("fmt", REPORT_FORMATS)
def test_every_report_format_renders_a_run(fmt: str) -> None:
    text = render_eval_report(run_of({"a": ["passed"], "b": ["failed"]}), fmt)
    assert "synthetic" in text
