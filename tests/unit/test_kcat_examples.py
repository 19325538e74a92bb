"""Every documented kcat producer command names the partitioner evalstream's workers expect:
kcat's default (CRC32) would put an episode's signals on another partition than murmur2."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FLAG = "-X topic.partitioner=murmur2_random"


def kcat_commands(text: str) -> list[str]:
    """Shell commands (continuation lines joined) that run kcat."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line for line in joined.splitlines() if re.search(r"\bkcat\s+-", line)]


def test_every_kcat_producer_example_names_the_murmur2_partitioner() -> None:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    producers = [
        (path.name, command)
        for path in files
        for command in kcat_commands(path.read_text())
        if " -P" in command
    ]
    assert len(producers) >= 2  # the README's and the operations guide's
    missing = [(name, command) for name, command in producers if FLAG not in command]
    assert missing == []
