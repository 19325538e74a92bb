"""Third-party assertion types load through the `evalstream.assertions` entry-point group."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalstream.assertions.errors import SuiteError
from evalstream.assertions.evaluation import registry
from evalstream.assertions.evaluation.registry import ENTRY_POINT_GROUP, parse_assertion
from evalstream.assertions.evaluation.verdicts import Verdict
from evalstream.assertions.suite_format.suites import parse_suite
from evalstream.assertions.testing import SignalFactory, run_assertions, run_reference

PLUGIN_DIR = Path(__file__).resolve().parents[2] / "examples" / "plugin"


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[None]:
    """Installs the example plugin as a real distribution: a .dist-info with entry points."""
    dist = tmp_path / "evalstream_textstats-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: evalstream-textstats\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\ntextstats = evalstream_textstats:TYPES\n"
    )
    sys.path[:0] = [str(tmp_path), str(PLUGIN_DIR)]
    registry._plugin_types.cache_clear()
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))
        sys.path.remove(str(PLUGIN_DIR))
        sys.modules.pop("evalstream_textstats", None)
        registry._plugin_types.cache_clear()


def test_unknown_without_the_plugin() -> None:
    with pytest.raises(SuiteError, match=re.escape("unknown assertion type 'text.deltas.max'")):
        parse_suite(
            {"name": "s", "defaultAssertions": [{"type": "text.deltas.max", "value": 1}]}, "f"
        )


@pytest.mark.usefixtures("installed_plugin")
def test_plugin_type_loads_from_its_entry_point_and_decides_early() -> None:
    suite = parse_suite(
        {"name": "s", "defaultAssertions": [{"type": "text.deltas.max", "value": 2}]}, "f"
    )
    assert suite.default_assertions[0].type == "text.deltas.max"
    f = SignalFactory()
    signals = [
        f("harness:start"),
        *(f("text:delta", {"content": "x"}) for _ in range(3)),
        f("harness:end"),
    ]
    [outcome] = run_assertions(suite.default_assertions, signals)
    assert (outcome.verdict, outcome.decided_at) == (Verdict.FAIL, signals[3].id)
    assert run_reference(suite.default_assertions, signals)[0].verdict is Verdict.FAIL
    [within] = run_assertions([{"type": "text.deltas.max", "value": 3}], signals)
    assert within.verdict is Verdict.PASS


@pytest.mark.usefixtures("installed_plugin")
def test_plugin_fields_are_validated_like_builtins() -> None:
    with pytest.raises(registry.AssertionParseError, match="unknown field 'valu'"):
        parse_assertion({"type": "text.deltas.max", "valu": 2})
