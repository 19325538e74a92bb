"""Grading eval-harness items: each item's outputs (one per attempt) through its grader.

Outputs are supplied by whoever ran the system (a dataset run, a file of recorded answers);
the code runner (for `function_output`), the judge (for model graders) and the review queue
(for human graders) are injected. An item's summary status:

- `error` if any attempt's grader errored, or the target failed to produce it (never a pass);
- `pending` for a human-graded item until `min_required` raters rated it in the review queue
  (never a pass);
- `skipped` without an output;
- `pass` when every attempt passed (strict, as a CI gate needs), else `fail`.

Attempts are graded concurrently, at most `max_concurrency` at once: the function-output
sandbox and the judge are the slow graders, and both run independent attempts in parallel.
pass@k and pass^k over the attempts are in the report's metrics.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalstream.assertions.graders.exact_match import ExactMatchConfig, grade_exact_match
from evalstream.assertions.graders.function_output import (
    CodeRunner,
    FunctionOutputConfig,
    grade_function_output,
)
from evalstream.assertions.graders.human_review import ReviewQueue
from evalstream.assertions.graders.model import ModelGraderConfig, grade_with_model
from evalstream.assertions.graders.regex_match import RegexConfig, grade_regex
from evalstream.assertions.graders.result import GradeResult
from evalstream.assertions.graders.structural import StructuralConfig, grade_structural
from evalstream.assertions.harness.models import EvalItem
from evalstream.assertions.judge.protocol import Judge

JSON = Any


@dataclass(frozen=True)
class OutputError:
    """An attempt whose output could not be obtained (the target failed): graded as `error`."""

    message: str


@dataclass
class ItemGrade:
    item: EvalItem
    attempts: list[GradeResult] = field(default_factory=list)
    skipped: str | None = None
    pending: str | None = None

    @property
    def status(self) -> str:
        if self.pending is not None:
            return "pending"
        if self.skipped is not None:
            return "skipped"
        if any(a.status == "error" for a in self.attempts):
            return "error"
        return "pass" if self.attempts and all(a.passed for a in self.attempts) else "fail"

    @property
    def passed_attempts(self) -> int:
        return sum(1 for a in self.attempts if a.status == "pass")

    def reason(self) -> str:
        """One line saying why the item did not pass."""
        if self.pending is not None:
            return self.pending
        if self.skipped is not None:
            return self.skipped
        for attempt in self.attempts:
            if attempt.status != "pass":
                return failure_reason(self.item, attempt)
        return ""


def _text(output: JSON) -> str:
    return output if isinstance(output, str) else json.dumps(output, sort_keys=True)


def failure_reason(item: EvalItem, result: GradeResult) -> str:
    if result.error is not None:
        return f"grader error: {result.error}"
    d = result.details
    grader = item.grader
    if isinstance(grader, ExactMatchConfig):
        return f"expected {d.get('expected')!r}, got {d.get('actual')!r}"
    if isinstance(grader, RegexConfig):
        matched = "matched but must not" if d.get("matched") else "did not match"
        return f"pattern {grader.pattern!r} {matched}"
    if isinstance(grader, FunctionOutputConfig):
        failed = [r for r in d.get("test_results", []) if not r.get("passed")]
        first = failed[0] if failed else {}
        why = (
            first.get("error")
            or f"returned {first.get('output')!r}, expected {first.get('expected')!r}"
        )
        total = d.get("total_count")
        return f"{len(failed)} of {total} test cases failed (case {first.get('case')}: {why})"
    if isinstance(grader, StructuralConfig):
        diffs = d.get("differences", [])
        shown = ", ".join(f"{x['path']} ({x['kind']})" for x in diffs[:3])
        more = f" and {len(diffs) - 3} more" if len(diffs) > 3 else ""
        return f"{len(diffs)} differences from the baseline: {shown}{more}"
    if isinstance(grader, ModelGraderConfig):
        return (
            f"judge score {result.score:.2f} below {grader.pass_threshold:.2f}: "
            f"{d.get('justification', '')}"
        ).rstrip(": ")
    return f"mean human rating {result.score:.2f} below {grader.pass_threshold:.2f}"


async def grade_output(
    item: EvalItem,
    output: JSON,
    *,
    judge: Judge | None = None,
    runner: CodeRunner | None = None,
) -> GradeResult:
    """One attempt's output through the item's (non-human) grader."""
    if isinstance(output, OutputError):
        return GradeResult.errored(output.message)
    grader = item.grader
    if isinstance(grader, ExactMatchConfig):
        return grade_exact_match(output, item.expected, grader, item.alternatives)
    if isinstance(grader, RegexConfig):
        return grade_regex(_text(output), grader)
    if isinstance(grader, StructuralConfig):
        return grade_structural(
            output, item.baseline if item.eval_type == "regression" else item.expected, grader
        )
    if isinstance(grader, FunctionOutputConfig):
        if runner is None:
            return GradeResult.errored("function_output needs a code runner (the sandbox)")
        return await asyncio.to_thread(grade_function_output, _text(output), grader, runner)
    if isinstance(grader, ModelGraderConfig):
        return await grade_with_model(
            _text(output),
            grader,
            judge,
            task=(item.input or {}).get("content") if isinstance(item.input, dict) else item.input,
            expected=item.expected if item.expected is not None else item.baseline,
        )
    return GradeResult.errored(f"{type(grader).__name__} is graded by people, not here")


def grade_human(item: EvalItem, queue: ReviewQueue | None) -> ItemGrade:
    if queue is None:
        return ItemGrade(item, pending="awaiting human review: no review queue given")
    try:
        review = queue.item(item.key)
    except ValueError:
        return ItemGrade(
            item,
            pending=f"awaiting human review: item {item.key!r} is not in the queue (it needs "
            "an output and a queue: --reviews QUEUE.json)",
        )
    result = queue.result(review)
    if result.status == "pending":
        need = queue.config.evaluators.min_required
        return ItemGrade(
            item,
            pending=f"awaiting human review: {len(result.raters)} of {need} required ratings",
        )
    score = result.score if result.score is not None else 0.0
    details: dict[str, JSON] = {
        "raters": result.raters,
        "percent_agreement": result.percent_agreement,
        "needs_adjudication": result.needs_adjudication,
    }
    if result.mean_ranks:
        details["mean_ranks"] = result.mean_ranks
    passed = result.status in ("pass", "ranked")
    return ItemGrade(item, [GradeResult(passed=passed, score=score, details=details)])


async def grade_items(
    items: Sequence[EvalItem],
    outputs: Mapping[str, JSON],
    *,
    judge: Judge | None = None,
    runner: CodeRunner | None = None,
    reviews: ReviewQueue | None = None,
    max_concurrency: int = 4,
    on_graded: Callable[[ItemGrade], None] | None = None,
) -> list[ItemGrade]:
    """Grade every item. `outputs[item.key]` is one output, or a list of attempts when
    `{"attempts": [...]}` is given (a bare list is one output: lists are valid outputs).
    `on_graded` is called as each item is done (progress)."""
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    semaphore = asyncio.Semaphore(max_concurrency)

    async def attempt(item: EvalItem, output: JSON) -> GradeResult:
        async with semaphore:
            return await grade_output(item, output, judge=judge, runner=runner)

    async def one(item: EvalItem) -> ItemGrade:
        if item.grader_type == "human":
            grade = grade_human(item, reviews)
        elif not (tries := attempts_of(outputs.get(item.key, {"attempts": []}))):
            grade = ItemGrade(item, skipped=f"no output for {item.key!r}")
        else:
            grade = ItemGrade(item, list(await asyncio.gather(*(attempt(item, o) for o in tries))))
        if on_graded is not None:
            on_graded(grade)
        return grade

    return list(await asyncio.gather(*(one(item) for item in items)))


def attempts_of(raw: JSON) -> list[JSON]:
    """An outputs-file entry as its attempts: `{"attempts": [...]}` or one output."""
    if isinstance(raw, dict) and set(raw) == {"attempts"} and isinstance(raw["attempts"], list):
        return list(raw["attempts"])
    return [raw]
