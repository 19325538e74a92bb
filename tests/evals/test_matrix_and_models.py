"""Matrix ranking, Pareto frontier and recommendation; results' JSON round-trip."""

from __future__ import annotations

import asyncio

from evalstream.assertions.evalruns.matrix import VariantResult, matrix_result
from evalstream.assertions.evalruns.models import DatasetResult, SampleStatus
from evalstream.assertions.evalruns.reports import dump_document, is_eval_run, read_eval_document
from evalstream.assertions.suite_format.suites import Suite
from evalstream.connectors.targets.spec import parse_target
from evalstream.stream.evalruns.runner import RunSettings, run_dataset
from tests.evals.conftest import AGENT
from tests.evals.factories import run_of

P: SampleStatus = "passed"
F: SampleStatus = "failed"


def variant(vid: str, result: DatasetResult) -> VariantResult:
    return VariantResult(variant_id=vid, variant_name=vid.upper(), result=result)


def test_rankings_frontier_and_recommendation() -> None:
    ten = {f"c{i}": [P] for i in range(10)}
    nine = {**ten, "c9": [F]}
    m = matrix_result(
        "m",
        [
            variant("best", run_of(ten, cost=0.02, latency=1000)),
            variant("cheap", run_of(nine, cost=0.005, latency=1000)),
            variant("fast", run_of(nine, cost=0.02, latency=200)),
            variant("dominated", run_of(nine, cost=0.03, latency=1500)),
        ],
    )
    cmp_ = m.comparison
    assert cmp_.by_pass_rate[0] == "best"
    assert cmp_.by_cost[0] == "cheap"
    assert cmp_.by_latency[0] == "fast"
    assert set(cmp_.pareto_frontier) == {"best", "cheap", "fast"}
    rec = m.recommendation
    assert rec is not None
    assert rec.variant_id == "best"
    assert rec.confidence == "medium"  # 10/10 vs 9/10 is no significant lead
    assert any("cheap is cheaper" in t for t in rec.tradeoffs)
    assert any("fast is faster" in t for t in rec.tradeoffs)


def test_recommendation_confidence_high_when_it_dominates() -> None:
    ten = {f"c{i}": [P] for i in range(10)}
    m = matrix_result(
        "m",
        [
            variant("a", run_of(ten, cost=0.01, latency=1000)),
            variant("b", run_of(ten, cost=0.02, latency=1003)),  # latency jitter is a tie
        ],
    )
    assert m.comparison.pareto_frontier == ["a"]
    assert m.recommendation is not None
    assert (m.recommendation.variant_id, m.recommendation.confidence) == ("a", "high")


def test_a_real_run_round_trips_through_json(example_suite: Suite) -> None:
    result = asyncio.run(run_dataset(example_suite, parse_target(AGENT), RunSettings(repeat=2)))
    data = dump_document(result)
    again = read_eval_document(data, "run.json")
    assert again == result
    assert is_eval_run(result.to_json())
    assert not is_eval_run({"kind": "something-else"})
    case = again.case("refund-small")
    assert case is not None
    assert case.samples[1].signals[0]["name"] == "harness:start"


def test_run_matrix_in_process(example_suite: Suite) -> None:
    from evalstream.assertions.evalruns.variants import load_variants  # noqa: PLC0415
    from evalstream.stream.evalruns.matrix import run_matrix  # noqa: PLC0415
    from tests.evals.conftest import EXAMPLE  # noqa: PLC0415

    variants = load_variants(EXAMPLE / "variants.yaml")
    m = asyncio.run(run_matrix(example_suite, variants, RunSettings(case_ids=("refund-small",))))
    assert [v.variant_id for v in m.variants] == ["v1", "lean", "hasty"]
    assert m.comparisons["hasty"].summary.should_block
    assert not m.comparisons["lean"].summary.should_block
    assert m.variants[2].result.case("refund-small").status == "failed"  # type: ignore[union-attr]
