#!/usr/bin/env python3
"""Compiles the hot-path modules with mypyc, in place (see assertions/native.py).

    python scripts/build_native.py            # build if a source changed since the last build
    python scripts/build_native.py --force    # build anyway
    python scripts/build_native.py --check    # exit 1 unless the build is current
    python scripts/build_native.py --clean    # remove the extensions: pure Python again

Needs a C compiler and the Python headers (gcc and python3-dev, or the python image's own).
The build type-checks the modules with the project's mypy settings first, as mypyc must.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_native() -> ModuleType:
    """assertions/native.py on its own, without importing the assertions package."""
    spec = importlib.util.spec_from_file_location(
        "_evalstream_native", ROOT / "assertions" / "native.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def artefacts(native: ModuleType) -> list[Path]:
    paths = [native.extension_path(m) for m in native.COMPILED]
    package, _, name = native.GROUP.rpartition(".")
    paths += sorted(ROOT.joinpath(*package.split(".")).glob(f"{name}__mypyc.*"))
    return [p for p in paths if p.exists()]


def clean(native: ModuleType) -> None:
    for path in artefacts(native):
        path.unlink()
    (ROOT / "assertions" / native.MANIFEST).unlink(missing_ok=True)


def build(native: ModuleType) -> None:
    from mypyc.build import mypycify  # noqa: PLC0415 - a dev dependency, needed only here
    from setuptools import setup  # noqa: PLC0415

    clean(native)
    sources = [str(native.source_path(m).relative_to(ROOT)) for m in native.COMPILED]
    started = time.monotonic()
    cwd = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="evalstream-native-") as tmp:
        build_dir = Path(tmp)
        os.chdir(ROOT)  # mypyc names modules by their paths relative to the working directory
        try:
            extensions = mypycify(
                sources, opt_level="3", group_name=native.GROUP, target_dir=str(build_dir / "c")
            )
        finally:
            os.chdir(cwd)
        # Compiled away from the project, so that setuptools does not read its pyproject.toml
        # (hatchling's), then copied next to the sources.
        os.chdir(build_dir)
        try:
            setup(
                name="evalstream-native",
                ext_modules=extensions,  # type: ignore[arg-type]  # setuptools.Extension items
                script_args=["-q", "build_ext", "--build-temp", "temp", "--build-lib", "lib"],
            )
        finally:
            os.chdir(cwd)
        for built in sorted((build_dir / "lib").rglob("*.so")):
            shutil.copy2(built, ROOT / built.relative_to(build_dir / "lib"))
    manifest = {
        "sources": native.source_hashes(),
        "python": sys.version.split()[0],
        "mypy": _mypy_version(),
    }
    (ROOT / "assertions" / native.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"compiled {len(native.COMPILED)} modules in {time.monotonic() - started:.0f} s")


def _mypy_version() -> str:
    from mypy.version import __version__  # noqa: PLC0415

    return str(__version__)


def current(native: ModuleType) -> str | None:
    """None when the build is current for these sources and this toolchain, else why not."""
    why = native.why_not_native(environ={})
    if why is not None:
        return str(why)
    manifest = native.read_manifest() or {}
    if manifest.get("mypy") != _mypy_version():
        return f"built with mypy {manifest.get('mypy')}, now {_mypy_version()}"
    if manifest.get("python") != sys.version.split()[0]:
        return f"built for Python {manifest.get('python')}"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--force", action="store_true", help="build even if current")
    group.add_argument("--check", action="store_true", help="exit 1 unless current")
    group.add_argument("--clean", action="store_true", help="remove the compiled modules")
    args = parser.parse_args()
    native = load_native()
    if args.clean:
        clean(native)
        print("removed the compiled modules; evalstream runs pure Python")
        return 0
    why = current(native)
    if args.check:
        print("compiled modules are current" if why is None else f"not current: {why}")
        return 0 if why is None else 1
    if why is None and not args.force:
        print("compiled modules are current")
        return 0
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        print("error: no C compiler; install gcc (Debian: apt-get install gcc)", file=sys.stderr)
        return 2
    print(f"compiling: {why or 'forced'}")
    build(native)
    return 0


if __name__ == "__main__":
    sys.exit(main())
