"""How to run the command line of a checkout, for benchmarks that compare two trees."""

from __future__ import annotations

from pathlib import Path


def cli_entry(root: Path) -> str:
    """The console script's code for the tree at `root`: `evalstream.stream.cli`, or
    `stream.cli` in a tree from before the packages moved under `evalstream/`."""
    if (root / "evalstream" / "stream" / "cli.py").is_file():
        return "from evalstream.stream.cli import main; main()"
    return "from stream.cli import main; main()"
