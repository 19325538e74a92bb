"""Generating every dashboard: file name -> JSON, and writing or checking the committed files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalstream.stream.dashboards import operations, overview, scores
from evalstream.stream.dashboards.board import DATASOURCE_UID, Board, render

JSON = Any
DASHBOARDS: dict[str, Callable[[str], Board]] = {
    "overview.json": overview.build,
    "scores.json": scores.build,
    "operations.json": operations.build,
}


def generate(datasource_uid: str = DATASOURCE_UID) -> dict[str, str]:
    """Every dashboard as the text of its committed file."""
    return {name: render(build(datasource_uid).to_json()) for name, build in DASHBOARDS.items()}


def write(directory: Path, datasource_uid: str = DATASOURCE_UID) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generate(datasource_uid).items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


__all__ = ["DASHBOARDS", "generate", "render", "write"]
