"""A rich progress bar for dataset and matrix runs (one task per dataset run)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from evalstream.assertions.evalruns.models import SampleResult


class RichProgress:
    """Implements evalstream.stream.evalruns.runner.Progress on a rich Progress (stderr by
    default)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "[green]{task.fields[passed]}✓ [red]{task.fields[failed]}✗ "
                "[yellow]{task.fields[errors]}!"
            ),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self.task: TaskID | None = None
        self.counts = {"passed": 0, "failed": 0, "error": 0}

    def __enter__(self) -> RichProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def begin(self, label: str, samples: int) -> None:
        self.counts = {"passed": 0, "failed": 0, "error": 0}
        self.task = self.bar.add_task(label, total=samples, passed=0, failed=0, errors=0)

    def sample_done(self, case_id: str, sample: SampleResult) -> None:
        if self.task is None:
            return
        self.counts[sample.status] += 1
        self.bar.update(
            self.task,
            advance=1,
            passed=self.counts["passed"],
            failed=self.counts["failed"],
            errors=self.counts["error"],
        )
        if sample.status != "passed":
            detail = sample.error or "; ".join(a.type for a in sample.failed_assertions())
            self.bar.console.print(
                f"  [{'red' if sample.status == 'failed' else 'yellow'}]{sample.status}[/] "
                f"{escape(case_id)}#{sample.index}: {escape(detail)}",
                markup=True,
                highlight=False,
            )

    def end(self) -> None:
        return None
