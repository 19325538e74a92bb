"""What `evalstream harness run` and `harness report` do (evalstream/stream/commands/harness.py
declares the commands): eval-harness suites as a CI gate.

    evalstream harness run --suite SUITE.yaml --outputs OUTPUTS.json [--report out.xml]
    evalstream harness run --suite SUITE.yaml --target cmd:python agent.py --attempts 3
    evalstream harness report --results RESULT.json --format md

`run` loads the suite (`evalstream.assertions.harness.loader`), takes outputs from an outputs file
or runs a target (the kinds `eval` uses) `--attempts` times per item, grades them (code graders, the
judge for model graders, the review queue for human graders; the slow ones in a bounded pool),
writes the report (Markdown, JSON, JUnit XML) and gates on thresholds: the suite's
`eval_trigger` block, overridden by `--threshold`; without any, every item must pass.

Exit codes: 0 the gate passed (or failed with `on_failure: warn`); 1 a threshold was missed
and the gate blocks; 2 a usage or input error.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from evalstream.assertions.errors import InputError
from evalstream.assertions.file_kinds import FileKind
from evalstream.assertions.graders.function_output import CodeRunner, FunctionOutputConfig
from evalstream.assertions.graders.human_review import ReviewQueue
from evalstream.assertions.harness.grading import ItemGrade, grade_items
from evalstream.assertions.harness.loader import LoadedEvals, load_evals
from evalstream.assertions.harness.models import EvalItem
from evalstream.assertions.harness.report import (
    REPORT_FORMATS,
    SUFFIX_FORMATS,
    build_report,
    render_report,
)
from evalstream.assertions.harness.review_items import enqueue_human_items, new_queue
from evalstream.assertions.harness.scale_check import scale_warnings
from evalstream.assertions.harness.selection import select_items
from evalstream.assertions.harness.thresholds import (
    GateResult,
    OnFailure,
    evaluate_gate,
    gate_lines,
    ks_needed,
    parse_threshold_flag,
)
from evalstream.assertions.judge.protocol import Judge
from evalstream.assertions.wire.pricing import default_pricing
from evalstream.connectors.files.file_kinds import expecting
from evalstream.connectors.sandboxing.code_runner import RefusingRunner, code_runner
from evalstream.connectors.targets.collect import Question, collect_outputs
from evalstream.connectors.targets.spec import parse_target
from evalstream.stream.commands.user_error import UserError
from evalstream.stream.grading.review_session import load_queue, save_queue
from evalstream.stream.judge import judge_from

JSON = Any
DEFAULT_THRESHOLDS = {"pass_rate": 1.0}  # without thresholds, every item must pass


class Progress:
    """Progress lines on stderr, for long runs; silent unless enabled."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.total = 0
        self.done = 0
        self.stage = ""

    def begin(self, stage: str, total: int) -> None:
        self.stage, self.total, self.done = stage, total, 0

    def step(self, what: str) -> None:
        self.done += 1
        if self.enabled:
            click.echo(f"[{self.stage} {self.done}/{self.total}] {what}", err=True)


@dataclass(frozen=True)
class Gate:
    thresholds: dict[str, float]
    on_failure: OnFailure


def _report_targets(paths: Sequence[str], fmt: str | None) -> list[tuple[Path, str]]:
    """Each --report path with its format (from --format, else the suffix), checked before
    any work is done."""
    out = []
    for path in paths:
        chosen = fmt or SUFFIX_FORMATS.get(Path(path).suffix.lower())
        if chosen is None:
            raise UserError(
                f"--report {path!r}: cannot tell the format from the suffix; use "
                f"{', '.join(SUFFIX_FORMATS)} or pass --format {'|'.join(REPORT_FORMATS)}"
            )
        out.append((Path(path), chosen))
    return out


def _load(path: str) -> LoadedEvals:
    """The suite; a file of another kind (signals, a store export...) says which command
    reads it instead of listing the eval-harness fields it lacks."""
    try:
        with expecting(path, FileKind.EVAL_HARNESS):
            loaded = load_evals(path)
    except InputError as exc:
        raise UserError(str(exc)) from exc
    if not loaded.items:
        raise UserError(f"{path}: the suite has no eval items")
    return loaded


def _gate(loaded: LoadedEvals, flags: Sequence[str], on_failure: str | None) -> Gate:
    trigger = loaded.suite.eval_trigger if loaded.suite is not None else None
    thresholds = dict(trigger.thresholds) if trigger is not None else {}
    for flag in flags:
        try:
            name, value = parse_threshold_flag(flag)
        except ValueError as exc:
            raise UserError(str(exc)) from exc
        thresholds[name] = value
    chosen: OnFailure = trigger.on_failure if trigger is not None else "block"
    if on_failure is not None:
        chosen = "warn" if on_failure == "warn" else "block"
    return Gate(thresholds or dict(DEFAULT_THRESHOLDS), chosen)


def _read_outputs(path: str) -> dict[str, JSON]:
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read outputs file {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise UserError(
            f"{path}: expected a JSON object of item key -> output (or "
            '{"attempts": [...]}), e.g. {"cap-string-001/tc-001": "olleh"}'
        )
    return data


def _unknown_output_keys(outputs: Mapping[str, JSON], loaded: LoadedEvals) -> list[str]:
    keys = {item.key for item in loaded.items}
    return sorted(k for k in outputs if k not in keys)


def _progress_enabled(flag: bool | None) -> bool:
    return flag if flag is not None else sys.stderr.isatty()


def _fill_queue(
    path: str | None, name: str, items: Sequence[EvalItem], outputs: Mapping[str, JSON]
) -> ReviewQueue | None:
    """The review queue with the human items' outputs added (saved when any was added)."""
    if path is None:
        return None
    queue = load_queue(path) if Path(path).exists() else new_queue(name, items)
    added = enqueue_human_items(queue, items, outputs)
    if added:
        save_queue(queue, path)
        click.echo(
            f"queued {len(added)} items for human review in {path}: "
            f"evalstream review rate {path} --rater NAME"
        )
    return queue


def _run_target(
    spec: str,
    items: Sequence[EvalItem],
    attempts: int,
    timeout_s: float,
    concurrency: int,
    shown: Progress,
    *,
    sandbox: bool = False,
) -> dict[str, JSON]:
    try:
        agent = parse_target(spec, sandbox=sandbox)
    except InputError as exc:
        raise UserError(str(exc)) from exc
    questions = [Question(item.key, item.input, timeout_s) for item in items]
    shown.begin("outputs", len(questions) * attempts)
    return asyncio.run(
        collect_outputs(
            agent,
            questions,
            attempts=attempts,
            concurrency=concurrency,
            on_done=lambda key, i: shown.step(f"{key} attempt {i + 1}"),
        )
    )


def _code_runner(items: Sequence[EvalItem], no_sandbox: bool) -> CodeRunner | None:
    """The sandbox for `function_output` items; refused (exit 2) where it cannot start."""
    if not any(isinstance(item.grader, FunctionOutputConfig) for item in items):
        return None
    runner = code_runner(no_sandbox)
    if isinstance(runner, RefusingRunner):
        raise UserError(runner.reason + "; or pass --no-sandbox to run graded code unconfined")
    if runner.isolation == "off":
        click.echo(
            "warning: the sandbox is off (--no-sandbox / EVALSTREAM_SANDBOX=off): graded code "
            "runs as this user with its file system",
            err=True,
        )
    return runner


async def _grade(
    items: Sequence[EvalItem],
    outputs: Mapping[str, JSON],
    *,
    judge_spec: str | None,
    reviews: ReviewQueue | None,
    workers: int,
    progress: Progress,
    runner: CodeRunner | None,
) -> list[ItemGrade]:
    judge: Judge | None = None
    if any(item.grader_type == "model" for item in items):
        try:
            judge = judge_from(judge_spec, pricing=default_pricing())
        except InputError as exc:
            raise UserError(str(exc)) from exc
    progress.begin("graded", len(items))
    try:
        return await grade_items(
            items,
            outputs,
            judge=judge,
            runner=runner,
            reviews=reviews,
            max_concurrency=workers,
            on_graded=lambda g: progress.step(f"{g.item.key}: {g.status}"),
        )
    finally:
        close = getattr(judge, "aclose", None)
        if close is not None:
            await close()


def _workers(flag: int | None, loaded: LoadedEvals) -> int:
    if flag is not None:
        if flag < 1:
            raise UserError(f"--workers must be at least 1, got {flag}")
        return flag
    config = loaded.suite.config if loaded.suite is not None else {}
    if config.get("parallel_execution") is False:
        return 1
    value = config.get("max_workers", 4)
    return value if isinstance(value, int) and value >= 1 else 4


def _item_line(g: ItemGrade) -> str:
    attempts = f" ({g.passed_attempts}/{len(g.attempts)} attempts)" if len(g.attempts) > 1 else ""
    reason = g.reason()
    return f"  {g.status:<7} {g.item.key}{attempts}" + (f": {reason}" if reason else "")


def _summary(report: Mapping[str, JSON], grades: Sequence[ItemGrade], verbose: bool) -> None:
    r = report["eval_report"]
    s = r["summary"]
    click.echo(
        f"{r['metadata']['suite_name']}: {s['passed']}/{s['total_evals']} passed, "
        f"{s['failed']} failed, {s['errors']} errors, {s['pending']} pending human review, "
        f"{s['skipped']} skipped (pass rate {s['pass_rate']:.1%})"
    )
    metrics = ", ".join(
        f"{name} {'n/a' if value is None else f'{value:.3f}'}"
        for name, value in r["metrics"].items()
    )
    click.echo(f"metrics: {metrics}")
    for name, cov in r["metrics_coverage"].items():
        if cov["excluded_fewer_than_k_attempts"]:
            click.echo(
                f"note: {name} leaves out {cov['excluded_fewer_than_k_attempts']} items with "
                "fewer attempts than k"
            )
    shown = [g for g in grades if verbose or g.status not in ("pass",)]
    if shown:
        click.echo("items:" if verbose else "not passed:")
        for g in shown:
            click.echo(_item_line(g))
            if verbose and len(g.attempts) > 1:
                for i, a in enumerate(g.attempts, 1):
                    click.echo(f"      attempt {i}: {a.status}")
    for warning in r["warnings"]:
        click.echo(f"warning: {warning}", err=True)


def _write_reports(report: dict[str, JSON], targets: Sequence[tuple[Path, str]]) -> None:
    for path, fmt in targets:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render_report(report, fmt), encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write report {path}: {exc.strerror or exc}") from exc
        click.echo(f"report: {path} ({fmt})")


def _announce_gate(gate: GateResult) -> None:
    if gate.passed:
        click.echo("gate passed:")
    elif gate.blocking:
        click.echo("gate FAILED (blocking):")
    else:
        click.echo("gate failed (on_failure: warn, not blocking):")
    click.echo("\n".join(gate_lines(gate)))


def run(
    *,
    suite_path: str,
    target: str | None,
    outputs_path: str | None,
    attempts: int,
    categories: tuple[str, ...],
    tags: tuple[str, ...],
    grader_types: tuple[str, ...],
    threshold_flags: tuple[str, ...],
    on_failure: str | None,
    reports: tuple[str, ...],
    fmt: str | None,
    reviews_path: str | None,
    judge_spec: str | None,
    workers: int | None,
    timeout_s: float,
    sandbox_target: bool,
    no_sandbox: bool,
    verbose: bool,
    progress: bool | None,
) -> None:
    """`harness run`: grade, report, gate (exits 0 pass, 1 blocked; UserError for bad input)."""
    if (target is None) == (outputs_path is None):
        raise UserError("give exactly one of --target SPEC (run it) or --outputs FILE (recorded)")
    if sandbox_target and target is None:
        raise UserError("--sandbox runs the --target in the sandbox; with --outputs nothing runs")
    if attempts < 1:
        raise UserError(f"--attempts must be at least 1, got {attempts}")
    if timeout_s <= 0:
        raise UserError(f"--timeout must be positive, got {timeout_s:g}")
    report_targets = _report_targets(reports, fmt)
    loaded = _load(suite_path)
    gate_config = _gate(loaded, threshold_flags, on_failure)
    suite_name = loaded.suite.name if loaded.suite is not None else Path(suite_path).stem
    trigger = loaded.suite.eval_trigger if loaded.suite is not None else None
    if not report_targets and trigger is not None and trigger.report_path:
        report_targets = _report_targets([str(Path(suite_path).parent / trigger.report_path)], fmt)
    try:
        items = select_items(
            loaded.items, categories=categories, tags=tags, grader_types=grader_types
        )
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if not items:
        raise UserError("the filters leave no item to grade (they match no item together)")
    pool = _workers(workers, loaded)
    shown = Progress(_progress_enabled(progress))
    warnings = scale_warnings(items)
    started = time.monotonic()

    if outputs_path is not None:
        outputs = _read_outputs(outputs_path)
        unknown = _unknown_output_keys(outputs, loaded)
        if unknown:
            warnings.append(
                f"{outputs_path}: outputs for keys that are not items of the suite (typos?): "
                f"{', '.join(unknown)}"
            )
    else:
        assert target is not None
        # Human items' outputs only matter when they can go to a review queue.
        asked = [i for i in items if i.grader_type != "human" or reviews_path is not None]
        outputs = _run_target(
            target, asked, attempts, timeout_s, pool, shown, sandbox=sandbox_target
        )
    runner = _code_runner(items, no_sandbox)
    if runner is not None and runner.isolation == "off":
        warnings.append(
            "graded code ran without the sandbox (--no-sandbox / EVALSTREAM_SANDBOX=off)"
        )
    queue = _fill_queue(reviews_path, suite_name, items, outputs)
    grades = asyncio.run(
        _grade(
            items,
            outputs,
            judge_spec=judge_spec,
            reviews=queue,
            workers=pool,
            progress=shown,
            runner=runner,
        )
    )
    report = build_report(
        grades,
        suite_name=suite_name,
        run_id=secrets.token_hex(6),
        timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
        duration_seconds=round(time.monotonic() - started, 3),
        environment={
            "suite": suite_path,
            "target": target,
            "outputs": outputs_path,
            "attempts": attempts,
            "sandbox": runner.isolation if runner is not None else None,
            "filters": {
                "category": list(categories),
                "tag": list(tags),
                "grader_type": list(grader_types),
            },
        },
        ks=ks_needed(gate_config.thresholds, attempts),
        warnings=warnings,
    )
    gate = evaluate_gate(report, gate_config.thresholds, gate_config.on_failure)
    report["eval_report"]["gate"] = gate.to_json()
    _summary(report, grades, verbose)
    _write_reports(report, report_targets)
    _announce_gate(gate)
    sys.exit(1 if gate.blocking else 0)


def _read_results(path: str) -> dict[str, JSON]:
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not JSON ({exc})") from exc
    r = data.get("eval_report") if isinstance(data, dict) else None
    if not isinstance(r, dict) or not {"metadata", "summary", "metrics"} <= set(r):
        raise UserError(
            f"{path}: not a harness result; expected the JSON that `evalstream harness run "
            "--report RESULT.json` writes (an `eval_report` with metadata, summary, metrics)"
        )
    r.setdefault("failures", [])
    r.setdefault("skipped", [])
    r.setdefault("recommendations", [])
    return {"eval_report": r}


def report(results: str, fmt: str | None, out: str | None) -> None:
    """`harness report`: re-render a saved result."""
    report = _read_results(results)
    chosen = fmt or (SUFFIX_FORMATS.get(Path(out).suffix.lower()) if out else None) or "md"
    text = render_report(report, chosen)
    if out:
        try:
            Path(out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc.strerror or exc}") from exc
    else:
        sys.stdout.write(text)
