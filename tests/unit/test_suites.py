"""Suite loading: every error names file, line, column, the bad value and the valid choices."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from evalstream.assertions.errors import SuiteError
from evalstream.assertions.suite_format.schema import suite_json_schema
from evalstream.assertions.suite_format.suites import load_suite
from evalstream.assertions.suite_format.yaml_positions import load_yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "line", "column", "fragments"),
    [
        pytest.param(
            "name: s\ncases:\n  - id: a\n    input: {}\n    assertions:\n"
            "      - type: signal.contain\n        pattern: x\n",
            6,
            15,
            [
                "unknown assertion type 'signal.contain'",
                "did you mean 'signal.contains'",
                "valid types:",
            ],
            id="unknown-type",
        ),
        pytest.param(
            "name: s\ndefaultAssertions:\n  - type: signal.not\n    patern: 'error:*'\n",
            4,
            5,
            [
                "unknown field 'patern'",
                "did you mean 'pattern'",
                "valid fields: type, pattern, payload",
            ],
            id="unknown-field",
        ),
        pytest.param(
            "name: s\ndefaultAssertions:\n  - type: output.matches\n    regex: '(unclosed'\n",
            3,
            5,
            ["regex '(unclosed' does not compile"],
            id="bad-regex",
        ),
        pytest.param(
            "name: s\ndefaultAssertions:\n  - type: output.matches\n    regex: a\n    flags: iq\n",
            3,
            5,
            ["unknown regex flag 'q'", "valid flags"],
            id="bad-flag",
        ),
        pytest.param(
            "name: s\ndefaultAssertions:\n"
            "  - type: snapshot.final\n    path: 'a..b'\n    exists: true\n",
            3,
            5,
            ["bad segment"],
            id="bad-path",
        ),
        pytest.param(
            "name: s\ncases:\n  - id: a\n    assertions: []\n  - id: a\n    assertions: []\n",
            3,
            3,
            ["duplicate case id 'a'"],
            id="duplicate-case",
        ),
        pytest.param("cases: []\n", 1, 1, ["missing required field `name`"], id="missing-name"),
        pytest.param(
            "name: s\nname: t\n",
            2,
            1,
            ["duplicate key 'name'"],
            id="duplicate-key",
        ),
        pytest.param("name: s\ncases: [\n", 3, 1, ["invalid YAML"], id="yaml-syntax"),
        pytest.param(
            "name: s\ndefaultAssertions:\n  - type: all\n    assertions:\n"
            "      - type: tool.called\n        name: Edit\n        count: 1\n        min: 2\n",
            5,
            9,
            ["use either `count` or `min`/`max`, not both"],
            id="nested-count-conflict",
        ),
        pytest.param(
            "name: s\nsample: 2\n",
            2,
            9,
            ["less than or equal to 1", "(got 2)"],
            id="bad-sample",
        ),
        pytest.param(
            "name: s\ncases:\n  - id: c\n    assertions: []\n    tagz: [x]\n",
            5,
            5,
            ["unknown field 'tagz'", "valid fields:"],
            id="unknown-case-field",
        ),
    ],
)
def test_errors_carry_position_and_explanation(
    tmp_path: Path, text: str, line: int, column: int, fragments: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    err = info.value
    assert (err.file, err.line, err.column) == (str(path), line, column), str(err)
    rendered = str(err)
    assert rendered.startswith(f"{path}:{line}:{column}:")
    for fragment in fragments:
        assert fragment in rendered


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="cannot read suite"):
        load_suite(tmp_path / "nope.yaml")


def test_merge_keys_and_anchors_are_supported(tmp_path: Path) -> None:
    suite = load_suite(
        write(
            tmp_path,
            "name: s\nmetadata: {base: &b {type: signal.not, pattern: 'error:*'}}\n"
            "defaultAssertions:\n  - *b\n  - {<<: *b, pattern: 'fatal:*'}\n",
        )
    )
    assert [a.wire()["pattern"] for a in suite.default_assertions] == ["error:*", "fatal:*"]


def test_positions_of_nested_values() -> None:
    _, positions = load_yaml("a:\n  b:\n    - x\n    - y: 1\n", "f")
    assert positions.find(("a", "b", 1, "y")) == (4, 10)
    assert positions.find(("a", "b", 1, "y"), key=True) == (4, 7)
    assert positions.find(("a", "b", 5)) == (3, 5)  # nearest known parent


@pytest.mark.parametrize("suite_dir", sorted(p.parent.name for p in EXAMPLES.glob("*/suite.yaml")))
def test_examples_validate_against_the_exported_schema(suite_dir: str) -> None:
    schema = suite_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    data, _ = load_yaml((EXAMPLES / suite_dir / "suite.yaml").read_text(), suite_dir)
    jsonschema.Draft202012Validator(schema).validate(data)
    load_suite(EXAMPLES / suite_dir / "suite.yaml")


def test_schema_rejects_what_the_loader_rejects() -> None:
    validator = jsonschema.Draft202012Validator(suite_json_schema())
    bad = {"name": "s", "defaultAssertions": [{"type": "signal.contains", "patern": "x"}]}
    assert not validator.is_valid(bad)
    good = {
        "name": "s",
        "defaultAssertions": [
            {"type": "not", "assertion": {"type": "signal.contains", "pattern": "x"}}
        ],
    }
    assert validator.is_valid(good), json.dumps(list(validator.iter_errors(good)), default=str)
