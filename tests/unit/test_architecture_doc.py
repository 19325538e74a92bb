"""ARCHITECTURE.md stays a true map of the code.

Every module (`__init__.py` aside) and folder of the three packages is named in its package's
table, every test tier folder in the test-tier table, and every path-like name in the
document (`something.py` or `folder/`) exists.

A name may be relative to the repository root, to the folder its section heading names (the
`evalstream/stream/` of "## `evalstream/stream/`") or, in a table row, to a folder named in the
row's first cell (the `kafka/` of the `deploy/` row is `deploy/kafka/`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "ARCHITECTURE.md"
PACKAGES = ("evalstream/assertions", "evalstream/connectors", "evalstream/stream")
TOKEN = re.compile(r"`([^`\s]+)`")
PATH_LIKE = re.compile(r"[\w.-]+(?:/[\w.-]+)*(?:\.py|/)")
SKIPPED_DIRS = {"__pycache__"}


@dataclass(frozen=True)
class Mention:
    line: int
    name: str
    section: str  # the folder of the section heading ("" when it names none)
    bases: tuple[str, ...]  # folders the name may be relative to, the root ("") included
    in_table: bool

    def candidates(self, root: Path) -> list[Path]:
        return [root / base / self.name for base in self.bases]

    def resolved(self, root: Path) -> list[Path]:
        wanted_dir = self.name.endswith("/")
        return [
            path
            for path in self.candidates(root)
            if (path.is_dir() if wanted_dir else path.is_file())
        ]


def _path_tokens(text: str) -> list[str]:
    return [tok for tok in TOKEN.findall(text) if PATH_LIKE.fullmatch(tok)]


def mentions(text: str) -> Iterator[Mention]:
    """Every backticked path-like name outside code blocks, with the folders it may be under."""
    section = ""
    in_code = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        if line.startswith("#"):
            folders = [tok for tok in _path_tokens(line) if tok.endswith("/")]
            section = folders[0] if folders else ""
            continue
        in_table = line.startswith("|")
        bases = ["", section]
        if in_table:
            first_cell = line.strip("|").split("|", 1)[0]
            for folder in (tok for tok in _path_tokens(first_cell) if tok.endswith("/")):
                bases += [folder, section + folder]
        for name in _path_tokens(line):
            yield Mention(number, name, section, tuple(dict.fromkeys(bases)), in_table)


def missing_paths(text: str, root: Path) -> list[str]:
    """`line N: name` for each path-like name that exists under none of its folders."""
    return [f"line {m.line}: {m.name}" for m in mentions(text) if not m.resolved(root)]


def tree(folder: Path) -> set[str]:
    """Modules (no `__init__.py`) and folders under `folder`, relative to it; folders end in /."""
    found: set[str] = set()
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if any(part in SKIPPED_DIRS or part.startswith(".") for part in rel.parts):
            continue
        if path.is_dir():
            found.add(f"{rel.as_posix()}/")
        elif path.suffix == ".py" and path.name != "__init__.py":
            found.add(rel.as_posix())
    return found


def named_in_table(text: str, root: Path, section: str) -> set[str]:
    """What the tables of `section` name, relative to `section`."""
    folder = (root / section).resolve()
    named: set[str] = set()
    for mention in mentions(text):
        if mention.section != section or not mention.in_table:
            continue
        for path in mention.resolved(root):
            resolved = path.resolve()
            if resolved.is_relative_to(folder) and resolved != folder:
                rel = resolved.relative_to(folder).as_posix()
                named.add(f"{rel}/" if path.is_dir() else rel)
    return named


def unnamed(text: str, root: Path, section: str, expected: set[str]) -> list[str]:
    return sorted(expected - named_in_table(text, root, section))


def section_text(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_every_path_named_in_the_document_exists() -> None:
    assert missing_paths(DOC.read_text(encoding="utf-8"), REPO) == []


def test_every_module_and_folder_of_each_package_is_in_its_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = {
        package: unnamed(text, REPO, f"{package}/", tree(REPO / package)) for package in PACKAGES
    }
    assert missing == {package: [] for package in PACKAGES}, (
        "add a row (or a name to a row) of the package's table in ARCHITECTURE.md"
    )


def test_every_test_tier_folder_is_in_the_test_table() -> None:
    tiers = {
        f"{path.name}/"
        for path in (REPO / "tests").iterdir()
        if path.is_dir() and path.name not in SKIPPED_DIRS and not path.name.startswith(".")
    }
    text = DOC.read_text(encoding="utf-8")
    assert unnamed(text, REPO, "tests/", tiers) == []


def test_a_stale_document_is_caught(tmp_path: Path) -> None:
    """The checks name what is wrong: a row lost, a module removed, a tier not listed."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for name in ("pkg/a.py", "pkg/b.py", "pkg/sub/c.py", "pkg/__init__.py"):
        (tmp_path / name).write_text("")
    text = (
        "# Map\n\n## `pkg/`\n\n| module | what |\n|---|---|\n"
        "| `a.py`, `gone.py` | see `pkg/b.py` |\n| `sub/` | `sub/c.py`; also `elsewhere/` |\n"
        "\n```text\n`not/checked.py`\n```\n"
    )
    assert missing_paths(text, tmp_path) == ["line 7: gone.py", "line 8: elsewhere/"]
    assert unnamed(text, tmp_path, "pkg/", tree(tmp_path / "pkg")) == []
    without_sub = text.replace("| `sub/` | `sub/c.py`; also `elsewhere/` |\n", "")
    assert unnamed(without_sub, tmp_path, "pkg/", tree(tmp_path / "pkg")) == ["sub/", "sub/c.py"]
    # A name in prose counts as existing but not as a table entry.
    prose_only = without_sub + "\nSee `sub/c.py`.\n"
    assert missing_paths(prose_only, tmp_path) == ["line 7: gone.py"]
    assert unnamed(prose_only, tmp_path, "pkg/", tree(tmp_path / "pkg")) == ["sub/", "sub/c.py"]
