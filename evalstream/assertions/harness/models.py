"""The eval-harness eval files as validated models, and their flattening into gradable items.

Shapes accepted (YAML or JSON):

- a capability eval item (`id, name, description, category, input, expected_output, grader,
  metadata`) and a regression eval item (`id, name, description, baseline_version, baseline,
  current, comparison, metadata`), alone, in a list, or under `capability_eval:` /
  `regression_eval:`;
- an eval file (`schema_version, eval_type, metadata, config, test_cases` for capability;
  `baseline, test_case, grader` for regression, the eval-harness JSON form);
- a suite (`eval_suite: {name, version, description, config, evals: [{$ref: path}], reporting,
  eval_trigger}`), whose `$ref`s are resolved by `evalstream.assertions.harness.loader`;
  `eval_trigger` (the CI gate, `evalstream.assertions.harness.thresholds`) may also sit beside
  `eval_suite:`.

Every shape becomes a list of `EvalItem`: one gradable question with its typed grader.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalstream.assertions.graders.exact_match import ExactMatchConfig
from evalstream.assertions.graders.function_output import FunctionOutputConfig, FunctionTestCase
from evalstream.assertions.graders.human_review import HumanGraderConfig
from evalstream.assertions.graders.model import ModelGraderConfig
from evalstream.assertions.graders.regex_match import RegexConfig
from evalstream.assertions.graders.structural import StructuralConfig
from evalstream.assertions.harness.thresholds import EvalTrigger

JSON = Any

CodeConfig = ExactMatchConfig | RegexConfig | FunctionOutputConfig | StructuralConfig
GraderConfig = CodeConfig | ModelGraderConfig | HumanGraderConfig

STRUCTURAL = ("structural", "structural_match")
CODE_METHODS: dict[str, type[BaseModel]] = {
    "exact_match": ExactMatchConfig,
    "exact": ExactMatchConfig,
    "regex": RegexConfig,
    "function_output": FunctionOutputConfig,
    "structural": StructuralConfig,
    "structural_match": StructuralConfig,
}


class _Open(BaseModel):
    """The eval-harness methodology documents free-form metadata: unknown keys are kept, not
    rejected."""

    model_config = ConfigDict(frozen=True, extra="allow")


class _Closed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Grader(_Closed):
    type: Literal["code", "model", "human"]
    config: dict[str, JSON] = Field(default_factory=dict)

    def typed(self) -> GraderConfig:
        """The configuration as its grader's model (raises ValueError with the choices)."""
        if self.type == "model":
            return ModelGraderConfig.model_validate(self.config)
        if self.type == "human":
            return HumanGraderConfig.model_validate(self.config)
        method = self.config.get("method")
        if method is None and "function_name" in self.config:
            method = "function_output"  # the eval-harness capability example omits the method
        model = CODE_METHODS.get(str(method))
        if model is None:
            raise ValueError(
                f"unknown code grader method {method!r}; valid methods: {', '.join(CODE_METHODS)}"
            )
        config = dict(self.config)
        config.setdefault("method", method)
        return model.model_validate(config)  # type: ignore[return-value]  # one of CodeConfig


class Input(_Open):
    type: str = "prompt"
    content: JSON = None
    context: dict[str, JSON] = Field(default_factory=dict)


class Expected(_Open):
    type: str = "exact"
    value: JSON = None
    alternatives: list[JSON] = Field(default_factory=list)


class ItemMetadata(_Open):
    difficulty: str | None = None
    tags: list[str] = Field(default_factory=list)
    timeout_seconds: float | None = None
    retries: int | None = None
    weight: float = Field(1.0, ge=0)
    criticality: str | None = None


class CapabilityEval(_Closed):
    id: str
    name: str = ""
    description: str = ""
    category: str = "uncategorised"
    input: Input = Field(default_factory=Input)
    expected_output: Expected = Field(default_factory=Expected)
    grader: Grader
    metadata: ItemMetadata = Field(default_factory=ItemMetadata)


class Baseline(_Open):
    output: JSON = None
    captured_at: str | None = None
    environment: dict[str, JSON] = Field(default_factory=dict)


class Comparison(_Closed):
    type: Literal["exact", "semantic", "numeric", "structural"] = "structural"
    tolerance: dict[str, JSON] = Field(default_factory=dict)
    ignore_fields: list[str] = Field(default_factory=list)
    options: dict[str, JSON] = Field(default_factory=dict)

    def structural(self) -> StructuralConfig:
        return StructuralConfig.model_validate(
            {
                "type": "structural" if self.type == "semantic" else self.type,
                "tolerance": self.tolerance,
                "ignore_fields": self.ignore_fields,
                **self.options,
            }
        )


class RegressionEval(_Closed):
    id: str
    name: str = ""
    description: str = ""
    baseline_version: str | None = None
    baseline: Baseline
    current: dict[str, JSON] = Field(default_factory=dict)
    comparison: Comparison = Field(default_factory=Comparison)
    metadata: ItemMetadata = Field(default_factory=ItemMetadata)


class FileMetadata(_Open):
    id: str
    name: str = ""
    description: str = ""
    category: str = "uncategorised"
    tags: list[str] = Field(default_factory=list)
    criticality: str | None = None


class FileTestCase(_Closed):
    id: str
    name: str = ""
    input: Input = Field(default_factory=Input)
    expected: Expected = Field(default_factory=Expected)
    grader: Grader | None = None
    weight: float = Field(1.0, ge=0)


class FileBaseline(_Open):
    version: str | None = None
    captured_at: str | None = None
    response: JSON = None
    output: JSON = None


class FileRegressionCase(_Closed):
    input: JSON = None
    comparison: Comparison = Field(default_factory=Comparison)


class EvalFile(_Closed):
    schema_version: str = "1.0"
    eval_type: Literal["capability", "regression"]
    metadata: FileMetadata
    config: dict[str, JSON] = Field(default_factory=dict)
    grader: Grader | None = None
    test_cases: list[FileTestCase] = Field(default_factory=list)
    baseline: FileBaseline | None = None
    test_case: FileRegressionCase | None = None

    @model_validator(mode="after")
    def _shape(self) -> EvalFile:
        if self.eval_type == "capability" and not self.test_cases:
            raise ValueError("a capability eval file needs `test_cases`")
        if self.eval_type == "regression" and self.baseline is None:
            raise ValueError("a regression eval file needs a `baseline`")
        for case in self.test_cases:
            if case.grader is None and self.grader is None:
                raise ValueError(f"test case {case.id!r} has no grader and the file none")
        return self


class EvalRef(_Closed):
    ref: str = Field(alias="$ref")


class EvalSuite(_Open):
    name: str
    version: str = "1.0.0"
    description: str = ""
    config: dict[str, JSON] = Field(default_factory=dict)
    evals: list[EvalRef] = Field(min_length=1)
    reporting: dict[str, JSON] = Field(default_factory=dict)
    eval_trigger: EvalTrigger | None = None


# --- the flat, gradable form -------------------------------------------------------------


class EvalItem(BaseModel):
    """One gradable question: the output of `input` is graded by `grader` against `expected`
    (capability) or `baseline` (regression)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    eval_id: str
    case_id: str | None = None
    name: str = ""
    eval_type: Literal["capability", "regression"]
    category: str = "uncategorised"
    grader_type: Literal["code", "model", "human"]
    grader: GraderConfig
    input: JSON = None
    expected: JSON = None
    alternatives: list[JSON] = Field(default_factory=list)
    baseline: JSON = None
    weight: float = 1.0
    tags: list[str] = Field(default_factory=list)
    source: str = ""

    @property
    def key(self) -> str:
        """`eval_id` or `eval_id/case_id`: how outputs and results name this item."""
        return self.eval_id if self.case_id is None else f"{self.eval_id}/{self.case_id}"


def _with_cases(config: GraderConfig, expected: Expected) -> GraderConfig:
    """The eval-harness capability example puts function test cases under `expected_output`."""
    if isinstance(config, FunctionOutputConfig) and not config.test_cases:
        raw = expected.value.get("test_cases") if isinstance(expected.value, dict) else None
        if isinstance(raw, list):
            cases = [FunctionTestCase.model_validate(c) for c in raw]
            return config.model_copy(update={"test_cases": cases})
    return config


def items_of_capability(ev: CapabilityEval, source: str) -> list[EvalItem]:
    config = _with_cases(ev.grader.typed(), ev.expected_output)
    return [
        EvalItem(
            eval_id=ev.id,
            name=ev.name,
            eval_type="capability",
            category=ev.category,
            grader_type=ev.grader.type,
            grader=config,
            input=ev.input.model_dump(),
            expected=ev.expected_output.value,
            alternatives=ev.expected_output.alternatives,
            weight=ev.metadata.weight,
            tags=ev.metadata.tags,
            source=source,
        )
    ]


def items_of_regression(ev: RegressionEval, source: str) -> list[EvalItem]:
    return [
        EvalItem(
            eval_id=ev.id,
            name=ev.name,
            eval_type="regression",
            category=ev.metadata.criticality or "regression",
            grader_type="code",
            grader=ev.comparison.structural(),
            input=ev.current.get("input"),
            baseline=ev.baseline.output,
            weight=ev.metadata.weight,
            tags=ev.metadata.tags,
            source=source,
        )
    ]


def items_of_file(ev: EvalFile, source: str) -> list[EvalItem]:
    meta = ev.metadata
    if ev.eval_type == "regression":
        assert ev.baseline is not None  # checked by the model
        regression = ev.test_case or FileRegressionCase()
        spec = ev.grader
        grader: GraderConfig
        if spec is None or (
            spec.type == "code" and spec.config.get("method", "structural") in STRUCTURAL
        ):
            # The comparison says what to compare, the grader how strictly: merge them.
            merged = regression.comparison.structural().model_dump(exclude_defaults=True)
            merged |= spec.config if spec is not None else {}
            grader = StructuralConfig.model_validate(merged)
        else:
            grader = spec.typed()
        baseline = ev.baseline.response if ev.baseline.response is not None else ev.baseline.output
        return [
            EvalItem(
                eval_id=meta.id,
                name=meta.name,
                eval_type="regression",
                category=meta.category,
                grader_type=spec.type if spec is not None else "code",
                grader=grader,
                input=regression.input,
                baseline=baseline,
                tags=meta.tags,
                source=source,
            )
        ]
    items: list[EvalItem] = []
    for case in ev.test_cases:
        case_spec = case.grader or ev.grader
        assert case_spec is not None  # checked by the model
        items.append(
            EvalItem(
                eval_id=meta.id,
                case_id=case.id,
                name=case.name or meta.name,
                eval_type="capability",
                category=meta.category,
                grader_type=case_spec.type,
                grader=_with_cases(case_spec.typed(), case.expected),
                input=case.input.model_dump(),
                expected=case.expected.value,
                alternatives=case.expected.alternatives,
                weight=case.weight,
                tags=meta.tags,
                source=source,
            )
        )
    return items
