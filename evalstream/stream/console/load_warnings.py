"""How the command line shows the warnings of loading user files: one `warning:` line on
stderr with the file's own location (the message has it), not Python's source location."""

from __future__ import annotations

import warnings
from typing import TextIO

import click

from evalstream.assertions.errors import SuiteWarning

PLAIN_CATEGORIES = (SuiteWarning,)


def show_warnings_plainly() -> None:
    """Installs the display once per process (a command may be invoked many times in one)."""
    previous = warnings.showwarning
    if getattr(previous, "evalstream_plain", False):
        return

    def show(  # noqa: PLR0917 - the signature of warnings.showwarning
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if issubclass(category, PLAIN_CATEGORIES):
            click.echo(f"warning: {message}", err=True)
        else:
            previous(message, category, filename, lineno, file, line)

    show.evalstream_plain = True  # type: ignore[attr-defined]  # marks the installed display
    warnings.showwarning = show
