"""Consoles for command output: fitted to a terminal, never wrapped anywhere else.

On a terminal rich wraps long lines and folds table cells to the window's width. Piped into
grep or a log collector, or written to a file, that would split an episode id over two
lines, so there a console is as wide as any line it prints: tables size to their content
and text is not wrapped.
"""

from __future__ import annotations

from typing import IO

from rich.console import Console

# Wider than any table row: a row holds a few ids, each at most signal_limits.MAX_ID_CHARS.
UNWRAPPED_WIDTH = 10_000


def output_console(
    *, stderr: bool = False, file: IO[str] | None = None, no_color: bool | None = None
) -> Console:
    """A console on stdout (stderr with `stderr`, or `file`): a terminal's as rich makes it,
    any other stream's unwrapped."""
    console = Console(stderr=stderr, file=file, no_color=no_color)
    if console.is_terminal:
        return console
    return Console(
        stderr=stderr, file=file, no_color=no_color, width=UNWRAPPED_WIDTH, soft_wrap=True
    )
