"""The wheel installs beside the PyPI distributions named `stream` and `connectors`.

Both names are taken on PyPI. A wheel with top-level packages of those names shares files with
them: installing one overwrites evalstream's, uninstalling it deletes them. Here evalstream's
wheel, then `connectors` and `stream`, go into one fresh virtual environment; no file may belong
to two distributions, every file must still match its RECORD hash, `import stream` and
`import connectors` must give the namesakes, and `evalstream check` must run before and after
they are uninstalled.

`connectors` 4.1 comes from PyPI (a top-level `connectors/` package). Every release of PyPI's
`stream` (0.5 to 0.8) is a Python 2 source distribution whose setup.py fails on Python 3
(`import __builtin__`), so a distribution of the same name that installs a top-level `stream/`
package, the files that would collide, stands in for it.

Dependencies are not downloaded again: a `.pth` file makes the test environment's own
site-packages visible to the new one, after its own, so whatever the new environment installs
wins.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "code-review"
NAMESAKES = ("stream", "connectors")
STAND_IN = (
    '"""Stands in for the PyPI distribution `stream` (Python 2 only)."""\n\nNAMESAKE = True\n'
)


def _env() -> dict[str, str]:
    """The environment of the new interpreter: nothing of this checkout on its path."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}


def _run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(),
        timeout=600,
        check=False,
    )


def _ok(*args: str | Path, cwd: Path | None = None) -> str:
    proc = _run(*args, cwd=cwd)
    assert proc.returncode == 0, f"{' '.join(map(str, args))}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _wheel(project: Path, out: Path) -> Path:
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    _ok(*pip_wheel, "-w", out, project)
    [wheel] = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def evalstream_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _wheel(REPO, tmp_path_factory.mktemp("evalstream-wheel"))


def _stand_in_wheel(root: Path) -> Path:
    project = root / "stream-stand-in"
    (project / "stream").mkdir(parents=True)
    (project / "stream" / "__init__.py").write_text(STAND_IN)
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "stream"\nversion = "0.8"\n\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["stream"]\n'
    )
    return _wheel(project, root / "stream-wheel")


def _venv(root: Path) -> tuple[Path, Path]:
    """A fresh environment (no pip of its own) that sees this one's packages after its own."""
    venv = root / "venv"
    _ok(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    purelib = Path(
        _ok(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    )
    # Where this interpreter finds its installed packages (site-packages, and what .pth files
    # there add), minus this checkout: evalstream must come from the wheel.
    visible = [p for p in sys.path if Path(p).name in {"site-packages", "dist-packages"}]
    (purelib / "zz_test_environment.pth").write_text("\n".join(visible) + "\n")
    return python, purelib


def _pip(python: Path, *args: str | Path) -> str:
    return _ok(sys.executable, "-m", "pip", "--python", python, *args)


def _records(purelib: Path) -> dict[str, dict[Path, str]]:
    """Per distribution installed in `purelib`: each file of its RECORD and its hash."""
    found: dict[str, dict[Path, str]] = {}
    for record in purelib.glob("*.dist-info/RECORD"):
        name = record.parent.name.split("-", 1)[0]
        with record.open(newline="") as f:
            rows = list(csv.reader(f))
        found[name] = {
            Path(os.path.normpath(purelib / row[0])): row[1] for row in rows if row and row[0]
        }
    return found


def _changed(files: dict[Path, str]) -> list[str]:
    """Files missing or not what their RECORD hash says."""
    bad = []
    for path, digest in files.items():
        if not digest:
            continue  # RECORD itself, and files compiled at install time
        algorithm, _, expected = digest.partition("=")
        if not path.is_file():
            bad.append(f"{path}: missing")
            continue
        actual = base64.urlsafe_b64encode(hashlib.new(algorithm, path.read_bytes()).digest())
        if actual.rstrip(b"=").decode() != expected:
            bad.append(f"{path}: changed")
    return bad


def _check_example(python: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = python.parent / "evalstream"
    return _run(
        exe,
        "check",
        "-s",
        EXAMPLE / "suite.yaml",
        EXAMPLE / "episodes.jsonl",
        "-f",
        "json",
        cwd=cwd,
    )


def test_the_wheel_is_pure_python(evalstream_wheel: Path) -> None:
    """The tag says any interpreter and platform, so nothing compiled may be in it."""
    assert evalstream_wheel.name.endswith("-py3-none-any.whl"), evalstream_wheel.name
    with zipfile.ZipFile(evalstream_wheel) as wheel:
        names = wheel.namelist()
        [meta] = [n for n in names if n.endswith(".dist-info/WHEEL")]
        tags = [
            line.split(":", 1)[1].strip()
            for line in wheel.read(meta).decode().splitlines()
            if line.startswith("Tag:")
        ]
    assert tags == ["py3-none-any"]
    assert [n for n in names if n.endswith((".so", ".pyd", ".dylib"))] == []


def test_installs_and_uninstalls_beside_its_pypi_namesakes(
    evalstream_wheel: Path, tmp_path: Path
) -> None:
    python, purelib = _venv(tmp_path)
    _pip(python, "install", "--no-deps", "--ignore-installed", "-q", evalstream_wheel)
    before = _check_example(python, tmp_path)
    assert before.returncode in (0, 1), before.stderr  # 1: some example episodes fail
    _pip(python, "install", "--no-deps", "-q", "connectors==4.1")
    _pip(python, "install", "--no-deps", "-q", _stand_in_wheel(tmp_path))

    records = _records(purelib)
    assert set(records) == {"evalstream", *NAMESAKES}
    owners: dict[Path, list[str]] = {}
    for name, files in records.items():
        for path in files:
            owners.setdefault(path, []).append(name)
    shared = sorted(f"{p.relative_to(purelib)}: {o}" for p, o in owners.items() if len(o) > 1)
    assert shared == [], "files that belong to two distributions"
    assert {name: _changed(files) for name, files in records.items()} == {
        name: [] for name in records
    }, "files overwritten by another distribution"

    where = _ok(
        python,
        "-c",
        "import stream, connectors, evalstream.stream, evalstream.connectors as c; "
        "print(stream.__file__, connectors.__file__, evalstream.stream.__file__, c.__file__)",
        cwd=tmp_path,
    ).split()
    owner = {str(p): o for p, o in owners.items()}
    assert [owner.get(str(Path(w))) for w in where] == [
        ["stream"],
        ["connectors"],
        ["evalstream"],
        ["evalstream"],
    ]
    after = _check_example(python, tmp_path)
    assert (after.returncode, after.stdout) == (before.returncode, before.stdout), after.stderr

    _pip(python, "uninstall", "-y", "-q", *NAMESAKES)
    remaining = _records(purelib)
    assert set(remaining) == {"evalstream"}
    assert _changed(remaining["evalstream"]) == [], "files removed with another distribution"
    assert _run(python, "-c", "import stream", cwd=tmp_path).returncode != 0
    uninstalled = _check_example(python, tmp_path)
    assert (uninstalled.returncode, uninstalled.stdout) == (before.returncode, before.stdout), (
        uninstalled.stderr
    )
