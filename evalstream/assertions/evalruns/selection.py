"""Which cases of a dataset run: `skip`, `only`, tags and case ids (the signal-native spec's
RunDatasetOptions).

Every case of the dataset appears in the plan, in file order; those that do not run carry the
reason, so a report shows what was left out and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalstream.assertions.errors import InputError
from evalstream.assertions.suite_format.suites import Case, Suite


@dataclass(frozen=True)
class PlannedCase:
    index: int
    case: Case
    skip_reason: str | None = None

    @property
    def runs(self) -> bool:
        return self.skip_reason is None


def category_of(case: Case) -> str | None:
    category = case.metadata.get("category")
    return category if isinstance(category, str) and category else None


def select_cases(
    suite: Suite, *, tags: Sequence[str] = (), case_ids: Sequence[str] = ()
) -> list[PlannedCase]:
    """Plan the cases: `skip: true` never runs; if any case has `only: true`, only those run;
    `tags` keeps cases with at least one of the tags; `case_ids` keeps the named cases.

    Unknown case ids are an input error naming the valid ids (a typo must not silently run
    nothing).
    """
    known = {c.id for c in suite.cases}
    unknown = [i for i in case_ids if i not in known]
    if unknown:
        valid = ", ".join(c.id for c in suite.cases)
        raise InputError(
            f"unknown case id(s) {', '.join(map(repr, unknown))} in dataset {suite.name!r}; "
            f"valid ids: {valid}"
        )
    has_only = any(c.only for c in suite.cases)
    wanted_tags = set(tags)
    wanted_ids = set(case_ids)
    planned: list[PlannedCase] = []
    for index, case in enumerate(suite.cases):
        reason: str | None = None
        if case.skip:
            reason = "skip: true in the dataset"
        elif has_only and not case.only:
            reason = "not marked only (another case is)"
        elif wanted_ids and case.id not in wanted_ids:
            reason = "not among the selected case ids"
        elif wanted_tags and not wanted_tags.intersection(case.tags):
            reason = f"has none of the tags {', '.join(sorted(wanted_tags))}"
        planned.append(PlannedCase(index, case, reason))
    if not any(p.runs for p in planned) and suite.cases:
        raise InputError(
            f"no case of dataset {suite.name!r} is selected "
            f"(tags: {', '.join(tags) or '-'}; case ids: {', '.join(case_ids) or '-'}); "
            f"available tags: {', '.join(sorted({t for c in suite.cases for t in c.tags})) or '-'}"
        )
    return planned


def for_dataset_run(suite: Suite) -> Suite:
    """The suite as a dataset run applies it: to every episode of the run (no `match:` and
    no `sample:`, which are for live traffic)."""
    return suite.model_copy(update={"match": {}, "sample": 1.0})
