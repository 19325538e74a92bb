"""The error a command raises for input it cannot use: printed as `error: <message>`, exit
code 2, no traceback. Its own module, so the commands and `evalstream.stream.cli` (which registers
them) both import it without importing each other."""

from __future__ import annotations

import click


class UserError(click.ClickException):
    """An input error shown without a traceback, exit code 2."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        click.echo(f"error: {self.message}", err=True)
