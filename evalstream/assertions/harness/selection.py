"""Which items of a suite a run grades: by category, tag and grader type.

Each filter given keeps the items matching any of its values; filters combine with AND. A
category matches the item's own `category` (e.g. `code_generation`) or its eval type
(`capability` / `regression`), the two groupings of the report. A value that matches no item
at all is an error naming the values that exist: it is a typo far more often than a wish to
grade nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalstream.assertions.harness.models import EvalItem


def _check(kind: str, wanted: Sequence[str], available: set[str]) -> None:
    unknown = [w for w in wanted if w not in available]
    if unknown:
        raise ValueError(
            f"{kind} {', '.join(repr(u) for u in unknown)} matches no item of the suite; "
            f"{kind}s in the suite: {', '.join(sorted(available)) or '(none)'}"
        )


def select_items(
    items: Sequence[EvalItem],
    *,
    categories: Sequence[str] = (),
    tags: Sequence[str] = (),
    grader_types: Sequence[str] = (),
) -> list[EvalItem]:
    _check("category", categories, {i.category for i in items} | {i.eval_type for i in items})
    _check("tag", tags, {t for i in items for t in i.tags})
    _check("grader type", grader_types, {i.grader_type for i in items})
    return [
        item
        for item in items
        if (not categories or item.category in categories or item.eval_type in categories)
        and (not tags or any(t in tags for t in item.tags))
        and (not grader_types or item.grader_type in grader_types)
    ]
