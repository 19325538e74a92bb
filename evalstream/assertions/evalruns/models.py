"""Results of dataset runs (the signal-native spec's CaseResult / DatasetResult), saved and
reloaded as JSON.

JSON keys follow the signal-native spec (camelCase: `caseId`, `passRate`, `aggregateMetrics`);
Python
attributes are snake_case. Every saved document names its `kind` and `schemaVersion`, so a
report command can tell a dataset run from a matrix run or a comparison.

One case may be run several times (`--repeat N`): each run is a *sample*. A case passes when
every sample passed; `passRate` is the share of passing samples averaged per case (pass@1),
which with one sample per case is simply passed cases / evaluated cases.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from evalstream.assertions.evaluation.engine import AssertionOutcome

JSON = Any
SCHEMA_VERSION = 1
DATASET_RUN: Final = "evalstream.dataset-run"

SampleStatus = Literal["passed", "failed", "error"]
CaseStatus = Literal["passed", "failed", "error", "skipped"]
# Why a sample errored: the target raised or exited non-zero, it ran out of time, its signals
# could not be decoded, an assertion could not decide (error verdict), or nothing applied.
ErrorKind = Literal["target", "timeout", "signals", "evaluation", "no_assertions"]


class Model(BaseModel):
    """Frozen, camelCase on the wire, tolerant of unknown keys (newer files load)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    def to_json(self) -> dict[str, JSON]:
        return self.model_dump(mode="json", by_alias=True)


class AssertionRecord(Model):
    """The verdict of one top-level assertion of one sample."""

    index: int
    type: str
    suite: str
    rule: str
    verdict: Literal["pass", "fail", "error", "pending"]
    message: str
    decided_at: str | None = None

    @staticmethod
    def of(outcome: AssertionOutcome) -> AssertionRecord:
        return AssertionRecord(
            index=outcome.index,
            type=outcome.type,
            suite=outcome.suite,
            rule=outcome.rule,
            verdict=outcome.verdict.value,
            message=outcome.message,
            decided_at=outcome.decided_at,
        )


class CaseMetrics(Model):
    """The signal-native spec's CaseMetrics, computed from the signals (DESIGN §4 metric.*)."""

    latency_ms: float = 0.0
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    total_tokens: float = 0.0
    cost: float = Field(0.0, description="USD")
    activations: float = 0.0
    tool_calls: float = 0.0
    llm_calls: float = 0.0
    cost_complete: bool = True


class SampleResult(Model):
    """One run of one case."""

    index: int = Field(description="Sample number within the case, from 0.")
    episode_id: str
    status: SampleStatus
    attempts: int = Field(1, description="1 + retries used (retries only follow errors).")
    error: str | None = None
    error_kind: ErrorKind | None = None
    duration_ms: float = Field(0.0, description="Wall time of the target run.")
    metrics: CaseMetrics | None = None
    assertions: list[AssertionRecord] = Field(default_factory=list)
    output: str | None = None
    final_state: dict[str, JSON] = Field(default_factory=dict)
    close_reason: str | None = None
    signals: list[dict[str, JSON]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def completed(self) -> bool:
        """The target ran to the end and was evaluated (passed or failed, not errored)."""
        return self.status != "error"

    def failed_assertions(self) -> list[AssertionRecord]:
        return [a for a in self.assertions if a.verdict != "pass"]


class CaseResult(Model):
    case_id: str
    name: str | None = None
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    category: str | None = Field(None, description="The case's metadata.category, if any.")
    status: CaseStatus
    skipped: bool = False
    skip_reason: str | None = None
    samples: list[SampleResult] = Field(default_factory=list)
    metrics: CaseMetrics | None = Field(None, description="Means over completed samples.")
    duration_ms: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def passes(self) -> int:
        return sum(1 for s in self.samples if s.passed)

    @property
    def errors(self) -> int:
        return sum(1 for s in self.samples if s.status == "error")

    @property
    def failures(self) -> int:
        return sum(1 for s in self.samples if s.status == "failed")

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.n if self.samples else None

    @property
    def label(self) -> str:
        return self.name or self.case_id

    def representative(self) -> SampleResult | None:
        """The sample to show: the first that did not pass, else the first."""
        for sample in self.samples:
            if not sample.passed:
                return sample
        return self.samples[0] if self.samples else None

    def error_message(self) -> str | None:
        for sample in self.samples:
            if sample.error:
                return sample.error
        return None


class PassMetrics(Model):
    """pass@k and both pass^k over the evaluated cases (means of the per-case estimates).

    `pass_hat_k_seed` is the eval-harness definition, (c/n)^k; `pass_hat_k_unbiased` is
    C(c, k) / C(n, k). pass@k and the unbiased pass^k need n ≥ k samples of every case;
    otherwise they are None and `undefined_reason` says why.
    """

    k: int
    samples_per_case_min: int = 0
    samples_per_case_max: int = 0
    pass_at_1: float | None = None
    pass_at_k: float | None = None
    pass_hat_k_seed: float | None = None
    pass_hat_k_unbiased: float | None = None
    undefined_reason: str | None = None


class AggregateMetrics(Model):
    """The signal-native spec's AggregateMetrics. Latency and token figures are over completed
    samples (an
    errored sample proves nothing about speed); cost totals include every sample, since an
    errored run was paid for too. None where no sample completed."""

    samples: int = 0
    completed_samples: int = 0
    avg_latency_ms: float | None = None
    min_latency_ms: float | None = None
    max_latency_ms: float | None = None
    p50_latency_ms: float | None = None
    p95_latency_ms: float | None = None
    p99_latency_ms: float | None = None
    total_cost: float = 0.0
    avg_cost_per_case: float | None = Field(None, description="Mean cost of a sample (USD).")
    total_tokens: float = 0.0
    avg_tokens_per_case: float | None = None
    total_activations: float = 0.0
    cost_complete: bool = True


class RunOptionsRecord(Model):
    """How the run was made (for the record; reruns use the same values)."""

    repeat: int = 1
    k: int = 3
    concurrency: int = 1
    default_timeout_ms: float | None = None
    retries: int = 0
    fail_fast: bool = False
    tags: list[str] = Field(default_factory=list)
    case_ids: list[str] = Field(default_factory=list)


class DatasetResult(Model):
    kind: Literal["evalstream.dataset-run"] = DATASET_RUN
    schema_version: int = SCHEMA_VERSION
    name: str
    description: str | None = None
    source: str | None = Field(None, description="The dataset file.")
    dataset_fingerprint: str | None = Field(
        None,
        description="SHA-256 of the dataset's case ids and inputs (fingerprint.py); absent "
        "in records of older versions, which are compared by case ids.",
    )
    run_id: str
    target: str | None = None
    variant_id: str | None = None
    variant_name: str | None = None
    total_cases: int
    passed_cases: int
    failed_cases: int
    error_cases: int
    skipped_cases: int
    pass_rate: float = Field(description="Mean per-case share of passing samples (pass@1).")
    pass_metrics: PassMetrics
    aggregate_metrics: AggregateMetrics
    cases: list[CaseResult]
    duration_ms: float = 0.0
    started_at: str | None = None
    completed_at: str | None = None
    interrupted: bool = False
    stopped_early: str | None = Field(None, description="Why the run stopped before the end.")
    options: RunOptionsRecord = Field(default_factory=RunOptionsRecord)
    metadata: dict[str, JSON] = Field(default_factory=dict)

    @property
    def evaluated_cases(self) -> int:
        return self.total_cases - self.skipped_cases

    def case(self, case_id: str) -> CaseResult | None:
        for case in self.cases:
            if case.case_id == case_id:
                return case
        return None

    def without_signals(self) -> DatasetResult:
        """A copy with the raw signals dropped (for comparisons and small files)."""
        cases = [
            c.model_copy(
                update={"samples": [s.model_copy(update={"signals": []}) for s in c.samples]}
            )
            for c in self.cases
        ]
        return self.model_copy(update={"cases": cases})

    def dumps(self) -> bytes:
        return orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
