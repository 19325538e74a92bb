"""The progress line of a command reading an episode store page by page (`score`, `nightly`)."""

from __future__ import annotations

import sys

from evalstream.connectors.episode_store import PageProgress


class StoreProgressLine:
    """`store: 12500 episodes read, 25 pages` on stderr after each page, rewritten in place
    on a terminal, one line a page otherwise; a retried page gets a line of its own."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last: PageProgress | None = None

    def __call__(self, progress: PageProgress) -> None:
        self.last = progress
        pages = f"{progress.pages} page" + ("" if progress.pages == 1 else "s")
        line = f"store: {progress.episodes} episodes read, {pages}"
        if progress.retries:
            line += f", {progress.retries} retried"
        if progress.retrying is not None:
            line = f"store: retrying the page at offset {progress.offset}: {progress.retrying}"
            sys.stderr.write(("\n" if self.tty else "") + line + "\n")
        else:
            sys.stderr.write(("\r" + line) if self.tty else line + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self.tty and self.last is not None:
            sys.stderr.write("\n")
