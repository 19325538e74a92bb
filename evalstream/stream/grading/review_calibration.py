"""What `evalstream review calibration` reads and writes: the judge-results file, the per-rubric
table (kappa, CI, floor flag, confusion matrix, largest disagreements) and the Prometheus
textfile of the agreement gauges."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import CollectorRegistry, write_to_textfile
from rich.console import Console
from rich.table import Table

from evalstream.assertions.graders.calibration import (
    JudgeScore,
    RubricCalibration,
    judge_scores_from_json,
)
from evalstream.assertions.graders.human_review import ReviewQueue
from evalstream.stream.commands.user_error import UserError
from evalstream.stream.telemetry.metrics import judge_agreement_gauges

FEW_ITEMS = 30  # below this the large-sample kappa interval is a rough guide only


def load_judge_scores(path: str, queue: ReviewQueue) -> list[JudgeScore]:
    """A JSON file (a list of records or `{"results": [...]}`) or JSON Lines, one record a line."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise UserError(f"cannot read judge results {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise UserError(
                f"{path}: neither JSON nor JSON Lines (line {exc.lineno}: {exc.msg}); "
                "give a list of {item_id, criterion, value | score} records"
            ) from exc
    try:
        return judge_scores_from_json(data, queue)
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from exc


def _label(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _number(value: float | None, digits: int = 3) -> str:
    return "undefined" if value is None else f"{value:.{digits}f}"


def calibration_table(
    queue: ReviewQueue, calibrations: list[RubricCalibration], top: int, console: Console
) -> None:
    table = Table(title=f"judge vs human: {queue.name}")
    for column in ("rubric", "items", "kappa", "95% CI", "weighting", "floor", "flag"):
        table.add_column(column)
    for c in calibrations:
        k = c.kappa
        ci = "" if k.ci_low is None else f"[{k.ci_low:.2f}, {k.ci_high:.2f}]"
        table.add_row(
            c.rubric,
            str(k.n),
            _number(k.kappa),
            ci,
            k.weighting,
            f"{c.floor:g}",
            "BELOW FLOOR" if c.below_floor else "",
        )
    console.print(table)
    small = [c.rubric for c in calibrations if 0 < c.kappa.n < FEW_ITEMS]
    if small:
        console.print(
            f"fewer than {FEW_ITEMS} items for {', '.join(small)}: the large-sample interval "
            "is too narrow there; rate more items before relying on it"
        )
    for c in calibrations:
        matrix = Table(title=f"{c.rubric}: confusion matrix (rows judge, columns human)")
        matrix.add_column("judge \\ human")
        for category in c.categories:
            matrix.add_column(_label(category), justify="right")
        for category, row in zip(c.categories, c.confusion, strict=True):
            matrix.add_row(_label(category), *(str(n) for n in row))
        console.print(matrix)
        if c.disagreements:
            worst = Table(title=f"{c.rubric}: disagreements, largest first")
            for column in ("item", "judge", "human", "distance", "raters"):
                worst.add_column(column)
            for d in c.disagreements[:top]:
                worst.add_row(
                    d.item_id, _label(d.judge), _label(d.human), f"{d.distance:g}", str(d.raters)
                )
            console.print(worst)
        if c.unmatched_judge:
            console.print(
                f"{c.rubric}: {c.unmatched_judge} judge scores left out (the item has fewer "
                f"than {queue.config.evaluators.min_required} human ratings)"
            )


def write_agreement_metrics(calibrations: list[RubricCalibration], path: str) -> None:
    """The per-rubric kappa and floor flag in the Prometheus text format (a node-exporter
    textfile-collector file)."""
    registry = CollectorRegistry()
    agreement, below_floor = judge_agreement_gauges(registry)
    for c in calibrations:
        if c.kappa.kappa is not None:
            agreement.labels(rubric=c.rubric).set(c.kappa.kappa)
        below_floor.labels(rubric=c.rubric).set(1 if c.below_floor else 0)
    try:
        write_to_textfile(path, registry)
    except OSError as exc:
        raise UserError(f"cannot write metrics file {path}: {exc.strerror or exc}") from exc
