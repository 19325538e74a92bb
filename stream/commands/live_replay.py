"""Live replay (placeholder until implemented)."""

from __future__ import annotations

from typing import Any


def run_live(**options: Any) -> None:
    from stream.cli import UserError  # noqa: PLC0415

    raise UserError("--mode live is not implemented yet")
