"""One entry point for every eval-run report: `render_eval_report(obj, fmt)`.

`obj` is a saved document (parsed JSON) or a model: a dataset run, a matrix run or a
comparison. `is_eval_run(obj)` tells such a document from other JSON (an episode-store scoring
result), so `evalstream report` can dispatch on a file's kind.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from evalstream.assertions.errors import InputError
from evalstream.assertions.evalruns.choices import REPORT_FORMATS
from evalstream.assertions.evalruns.compare import COMPARISON, Comparison
from evalstream.assertions.evalruns.matrix import MATRIX_RUN, MatrixResult
from evalstream.assertions.evalruns.models import DATASET_RUN, DatasetResult
from evalstream.assertions.evalruns.report_html import comparison_html, dataset_html, matrix_html
from evalstream.assertions.evalruns.report_json import (
    comparison_report,
    dataset_report,
    matrix_report,
)
from evalstream.assertions.evalruns.report_junit import (
    comparison_junit,
    dataset_junit,
    matrix_junit,
)
from evalstream.assertions.evalruns.report_markdown import (
    comparison_markdown,
    dataset_markdown,
    matrix_markdown,
)

JSON = Any
EvalDocument = DatasetResult | MatrixResult | Comparison
KINDS: dict[str, type[DatasetResult] | type[MatrixResult] | type[Comparison]] = {
    DATASET_RUN: DatasetResult,
    MATRIX_RUN: MatrixResult,
    COMPARISON: Comparison,
}
FORMATS = REPORT_FORMATS


def is_eval_run(obj: object) -> bool:
    """Whether `obj` is an eval-run document (or model) this module renders."""
    if isinstance(obj, DatasetResult | MatrixResult | Comparison):
        return True
    return isinstance(obj, dict) and obj.get("kind") in KINDS


def load_eval_document(obj: JSON, source: str = "<document>") -> EvalDocument:
    if isinstance(obj, DatasetResult | MatrixResult | Comparison):
        return obj
    if not is_eval_run(obj):
        kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
        raise InputError(
            f"{source}: not an eval-run document (kind {kind!r}); expected one of "
            f"{', '.join(KINDS)}, as written by `evalstream eval --out`, `matrix --out` or "
            "`compare --out`"
        )
    model = KINDS[obj["kind"]]
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(
            f"{source}: invalid {obj['kind']} document at {where}: {first['msg']}"
        ) from exc


def read_eval_document(data: bytes, source: str) -> EvalDocument:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{source}: not JSON: {exc}") from exc
    return load_eval_document(obj, source)


def render_eval_report(obj: JSON, fmt: str) -> str:
    """Render a dataset run, matrix run or comparison as md | json | junit | html."""
    if fmt not in FORMATS:
        raise InputError(f"unknown report format {fmt!r}; valid formats: {', '.join(FORMATS)}")
    doc = load_eval_document(obj)
    if isinstance(doc, DatasetResult):
        return _render(doc, fmt, (dataset_markdown, dataset_report, dataset_junit, dataset_html))
    if isinstance(doc, MatrixResult):
        return _render(doc, fmt, (matrix_markdown, matrix_report, matrix_junit, matrix_html))
    return _render(
        doc, fmt, (comparison_markdown, comparison_report, comparison_junit, comparison_html)
    )


def _render(doc: Any, fmt: str, renderers: tuple[Any, Any, Any, Any]) -> str:
    md, js, junit, html = renderers
    if fmt == "md":
        return str(md(doc))
    if fmt == "json":
        return orjson.dumps(js(doc), option=orjson.OPT_INDENT_2).decode() + "\n"
    if fmt == "junit":
        return str(junit(doc))
    return str(html(doc))


def dump_document(doc: EvalDocument) -> bytes:
    return orjson.dumps(doc.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
