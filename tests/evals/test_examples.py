"""The example dataset and variants file are valid documents of their formats."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from evalstream.assertions.errors import SuiteError
from evalstream.assertions.evalruns.variants import load_variants
from evalstream.assertions.suite_format.schema import suite_json_schema
from evalstream.assertions.suite_format.yaml_positions import load_yaml
from tests.evals.conftest import EXAMPLE


def test_example_dataset_validates_against_the_exported_schema() -> None:
    data, _ = load_yaml((EXAMPLE / "dataset.yaml").read_text(), "dataset.yaml")
    jsonschema.Draft202012Validator(suite_json_schema()).validate(data)


def test_example_variants_load() -> None:
    variants = load_variants(EXAMPLE / "variants.yaml")
    assert variants.baseline == "v1"
    assert [v.id for v in variants.variants] == ["v1", "lean", "hasty"]
    assert variants.base_dir == str(EXAMPLE)


def test_variants_errors_name_the_place_and_the_choices(tmp_path: Path) -> None:
    bad = tmp_path / "v.yaml"
    bad.write_text("variants:\n  - id: a\n    target: x:y\n    modle: big\n")
    with pytest.raises(SuiteError, match=r"v.yaml:4:5: variants\[0\].modle: unknown field"):
        load_variants(bad)
    bad.write_text("baseline: b\nvariants:\n  - {id: a, target: 'x:y'}\n")
    with pytest.raises(SuiteError, match="baseline 'b' is not a variant; valid ids: a"):
        load_variants(bad)
