"""Packaging guards: the wheel ships one package, `evalstream`, and ours is the one imported.

Its subpackages `assertions`, `connectors` and `stream` share their names with unrelated PyPI
distributions: installed at the top level, they would share files with them.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from evalstream import assertions, connectors, stream

REPO = Path(__file__).resolve().parents[1]


def test_the_three_packages_come_from_this_repository() -> None:
    for package in (assertions, connectors, stream):
        assert package.__file__ is not None
        assert Path(package.__file__).resolve().parents[2] == REPO, package.__file__


def test_wheel_ships_only_the_evalstream_package_and_the_pricing_data(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("evalstream-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"evalstream"}
    assert "evalstream/assertions/data/pricing.json" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert (
        "evalstream = evalstream.stream.cli:main"
        in zipfile.ZipFile(wheel).read(entry_points).decode()
    )
    # Pure Python: no extension module, so the universal tag is honest.
    assert not [n for n in names if n.endswith(".so")]
    assert wheel.name.endswith("-py3-none-any.whl")


def test_installed_command_runs_from_outside_the_repository(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "evalstream"
    proc = subprocess.run(
        [str(exe), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "check" in proc.stdout
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "from evalstream import stream, connectors, assertions; print(stream.__file__)",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(where.stdout.strip()).resolve().parents[2] == REPO
