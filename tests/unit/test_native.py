"""Compiled or pure Python (assertions.native): a stale or partial build never runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assertions import native

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the compiled modules' sources with a current manifest and (empty)
    extension files, as `scripts/build_native.py` leaves them."""
    for module in native.COMPILED:
        target = native.source_path(module, tmp_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(native.source_path(module), target)
        native.extension_path(module, tmp_path).write_bytes(b"")
    manifest = {"sources": native.source_hashes(native.COMPILED, tmp_path)}
    (tmp_path / "assertions" / native.MANIFEST).write_text(json.dumps(manifest))
    return tmp_path


def test_a_current_build_is_used(tree: Path) -> None:
    assert native.why_not_native(tree, environ={}) is None


def test_the_environment_can_ask_for_pure_python(tree: Path) -> None:
    assert native.why_not_native(tree, environ={native.ENV: "0"}) == f"{native.ENV}=0"


def test_an_edited_source_makes_the_build_stale(tree: Path) -> None:
    source = native.source_path("assertions.evaluation.engine", tree)
    source.write_text(source.read_text() + "\n# edited\n")
    why = native.why_not_native(tree, environ={})
    assert why is not None
    assert why.startswith("out of date")


def test_a_missing_extension_is_not_run_beside_pure_modules(tree: Path) -> None:
    native.extension_path("assertions.evaluation.facts", tree).unlink()
    assert native.why_not_native(tree, environ={}) == (
        "compiled module assertions.evaluation.facts is missing (run `make native`)"
    )


def test_no_manifest_means_not_compiled(tree: Path) -> None:
    (tree / "assertions" / native.MANIFEST).unlink()
    assert native.why_not_native(tree, environ={}) == "not compiled (run `make native`)"


def test_a_build_of_another_module_list_is_stale(tree: Path) -> None:
    path = tree / "assertions" / native.MANIFEST
    manifest = json.loads(path.read_text())
    del manifest["sources"][native.COMPILED[-1]]
    path.write_text(json.dumps(manifest))
    assert native.why_not_native(tree, environ={}) == (
        "compiled for another module list (run `make native`)"
    )


def _imported_file(module: str, **env: str) -> str:
    code = (
        f"import {module} as m, assertions.native as n; "
        "print(n.select().implementation, m.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_pure_python_is_imported_when_asked_for() -> None:
    implementation, file = _imported_file("stream.pipeline", **{native.ENV: "0"}).split()
    assert implementation == "pure"
    assert file.endswith("stream/pipeline.py")


def test_the_compiled_modules_run_when_the_build_is_current() -> None:
    """`make test` (and so CI) builds first and sets EVALSTREAM_REQUIRE_NATIVE: the tests
    and benchmarks then run the compiled modules, not their sources."""
    why = native.why_not_native(environ={})
    if why is not None:
        if os.environ.get("EVALSTREAM_REQUIRE_NATIVE") == "1":
            pytest.fail(f"the compiled modules cannot run: {why}")
        pytest.skip(f"not compiled here: {why}")
    implementation, file = _imported_file("stream.pipeline", **{native.ENV: "1"}).split()
    assert implementation == "native"
    assert file.endswith(Path(native.extension_path("stream.pipeline")).name)
    # This process runs what its own environment asks for.
    expected = "pure" if os.environ.get(native.ENV) == "0" else "native"
    assert native.select().implementation == expected
