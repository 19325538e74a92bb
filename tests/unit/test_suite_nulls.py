"""An unquoted `null` in a suite's list of strings (`tags: [debugging, null]`, as the
signal-native spec's debugging example writes it) loads as the word written, with a warning
naming file, line and column and saying to quote it."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from evalstream.assertions.errors import SuiteError, SuiteWarning
from evalstream.assertions.suite_format.suites import load_suite, parse_suite
from evalstream.assertions.suite_format.yaml_positions import load_yaml

DEBUGGING = """\
name: Debugging Agent Eval
description: Tests the debug → diagnose → fix workflow
match:
  tenant: [acme, NULL]
cases:
  - id: failing-test-null-error
    name: Fixes null pointer error from test failure
    tags: [debugging, null]
    assertions:
      - type: tool.called
        name: Read
        min: 2
"""


def test_unquoted_nulls_in_string_lists_load_as_written_with_located_warnings(
    tmp_path: Path,
) -> None:
    path = tmp_path / "debugging.yaml"
    path.write_text(DEBUGGING, encoding="utf-8")
    with pytest.warns(SuiteWarning) as caught:
        suite = load_suite(path)
    assert suite.cases[0].tags == ["debugging", "null"]
    assert suite.match == {"tenant": ["acme", "NULL"]}
    messages = sorted(str(w.message) for w in caught)
    assert messages == [
        f"{path}:4:18: match.tenant[1]: unquoted NULL read as the string 'NULL' (YAML reads "
        'it as no value); quote it ("NULL") to say so and silence this warning',
        f"{path}:8:23: cases[0].tags[1]: unquoted null read as the string 'null' (YAML reads "
        'it as no value); quote it ("null") to say so and silence this warning',
    ]


def test_a_quoted_null_loads_without_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "quoted.yaml"
    path.write_text(
        DEBUGGING.replace("[debugging, null]", '[debugging, "null"]').replace(
            "[acme, NULL]", "[acme, 'NULL']"
        ),
        encoding="utf-8",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        suite = load_suite(path)
    assert suite.cases[0].tags == ["debugging", "null"]


def test_an_empty_item_is_still_an_error_naming_its_place(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text(
        DEBUGGING.replace("[acme, NULL]", "[acme]").replace(
            "    tags: [debugging, null]", "    tags:\n      - debugging\n      -"
        ),
        encoding="utf-8",
    )
    with pytest.raises(SuiteError) as raised:
        load_suite(path)
    assert raised.value.path == "cases[0].tags[1]"
    assert (raised.value.file, raised.value.line) == (str(path), 10)


def test_nulls_outside_string_lists_and_the_callers_data_are_untouched() -> None:
    text = DEBUGGING.replace("[acme, NULL]", "[acme]") + "metadata: {owner: null}\n"
    data, positions = load_yaml(text, "inline.yaml")
    with pytest.warns(SuiteWarning):
        suite = parse_suite(data, "inline.yaml", positions)
    assert suite.metadata == {"owner": None}
    assert data["cases"][0]["tags"] == ["debugging", None]


def test_the_command_line_prints_the_warning_as_one_located_line(tmp_path: Path) -> None:
    path = tmp_path / "debugging.yaml"
    path.write_text(DEBUGGING, encoding="utf-8")
    exe = Path(sys.executable).parent / "evalstream"
    done = subprocess.run(
        [str(exe), "check", "--suite", str(path), "--allow-empty", "-"],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"warning: {path}:8:23: cases[0].tags[1]: unquoted null" in done.stderr
    assert "SuiteWarning" not in done.stderr  # not Python's own warning display


def test_the_spec_debugging_example_as_written_equals_the_quoted_one(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "debugging" / "suite.yaml"
    quoted = example.read_text(encoding="utf-8")
    assert 'tags: [debugging, "null"]' in quoted
    verbatim = tmp_path / "suite.yaml"
    verbatim.write_text(quoted.replace('[debugging, "null"]', "[debugging, null]"), "utf-8")
    with pytest.warns(SuiteWarning, match=r"suite\.yaml:17:23: cases\[0\]\.tags\[1\]"):
        as_written = load_suite(verbatim)
    assert as_written.model_dump() == load_suite(example).model_dump()
