"""Choices the command line declares without importing the modules that own them stay equal
to those modules' own values (the commands keep them apart so that `--help` starts fast)."""

from __future__ import annotations

from evalstream.assertions.graders.calibration import DEFAULT_FLOOR as CALIBRATION_FLOOR
from evalstream.assertions.harness.report import REPORT_FORMATS as HARNESS_FORMATS
from evalstream.connectors.otel_export.otlp_export import MODES
from evalstream.stream.commands.harness import REPORT_FORMATS
from evalstream.stream.commands.otlp_options import OTLP_MODES
from evalstream.stream.commands.review import DEFAULT_FLOOR


def test_otlp_modes_are_the_exporters() -> None:
    assert OTLP_MODES == MODES


def test_harness_report_formats_are_the_reports() -> None:
    assert REPORT_FORMATS == HARNESS_FORMATS


def test_review_calibration_floor_is_the_calibrations() -> None:
    assert DEFAULT_FLOOR == CALIBRATION_FLOOR
