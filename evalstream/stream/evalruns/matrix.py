"""runMatrix: the dataset once per variant, then ranking, Pareto frontier, recommendation, and
(with a baseline variant) a comparison of every other variant with it.

Variants run one after another, each with the run's concurrency, so their latencies are
measured under the same load. `interrupt()` stops the running variant and starts no more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from evalstream.assertions.evalruns.compare import CompareOptions, Comparison, compare
from evalstream.assertions.evalruns.matrix import MatrixResult, VariantResult, matrix_result
from evalstream.assertions.evalruns.variants import VariantsFile
from evalstream.assertions.evaluation.results import iso_ms
from evalstream.assertions.judge.protocol import Judge
from evalstream.assertions.suite_format.suites import Suite
from evalstream.assertions.wire.pricing import PricingTable
from evalstream.connectors.targets.spec import parse_target
from evalstream.stream.evalruns.runner import (
    DatasetRunner,
    Progress,
    RunSettings,
    new_run_id,
    wall_clock_ms,
)

JSON = Any


class MatrixRunner:
    def __init__(
        self,
        suite: Suite,
        variants: VariantsFile,
        settings: RunSettings | None = None,
        *,
        judge: Judge | None = None,
        pricing: PricingTable | None = None,
        clock: Callable[[], float] = wall_clock_ms,
        progress: Progress | None = None,
        compare_options: CompareOptions | None = None,
        sandbox: bool = False,
    ) -> None:
        self.suite = suite
        self.variants = variants
        self.settings = settings or RunSettings()
        self.judge = judge
        self.pricing = pricing
        self.clock = clock
        self.progress = progress
        self.compare_options = compare_options
        self.current: DatasetRunner | None = None
        self.interrupted = False
        # Every target is built before anything runs: a bad spec fails fast, naming it.
        self.targets = {
            v.id: parse_target(v.target, base_dir=variants.base_dir, sandbox=sandbox)
            for v in variants.variants
        }

    def interrupt(self) -> None:
        self.interrupted = True
        if self.current is not None:
            self.current.interrupt()

    async def run(self) -> MatrixResult:
        started = self.clock()
        t0 = time.monotonic()
        matrix_id = new_run_id(started)
        results: list[VariantResult] = []
        try:
            for spec in self.variants.variants:
                if self.interrupted:
                    break
                runner = DatasetRunner(
                    self.suite,
                    self.targets[spec.id],
                    self.settings,
                    judge=self.judge,
                    pricing=self.pricing,
                    clock=self.clock,
                    progress=self.progress,
                    run_id=f"{matrix_id}-{spec.id}",
                    variant_id=spec.id,
                    variant_name=spec.label,
                    config=spec.config,
                )
                self.current = runner
                result = await runner.run()
                results.append(
                    VariantResult(
                        variant_id=spec.id,
                        variant_name=spec.label,
                        result=result,
                        metadata=spec.metadata,
                    )
                )
        finally:
            for target in self.targets.values():
                await target.aclose()
        comparisons: dict[str, Comparison] = {}
        base_id = self.variants.baseline
        by_id = {v.variant_id: v for v in results}
        if base_id is not None and base_id in by_id:
            for v in results:
                if v.variant_id != base_id:
                    comparisons[v.variant_id] = compare(
                        by_id[base_id].result, v.result, self.compare_options
                    )
        return matrix_result(
            self.suite.name,
            results,
            baseline_variant=base_id,
            comparisons=comparisons,
            duration_ms=(time.monotonic() - t0) * 1000.0,
            started_at=iso_ms(started),
            completed_at=iso_ms(self.clock()),
            interrupted=self.interrupted,
        )


async def run_matrix(
    suite: Suite, variants: VariantsFile, settings: RunSettings | None = None, **kwargs: Any
) -> MatrixResult:
    """The signal-native spec's runMatrix: every variant over `suite` (see MatrixRunner)."""
    return await MatrixRunner(suite, variants, settings, **kwargs).run()
