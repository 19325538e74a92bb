"""Compiled or pure Python: which implementation of the hot-path modules runs.

The modules in `COMPILED` are compiled ahead of time with mypyc (`scripts/build_native.py`,
run by `make install`) into extension modules next to their sources, which Python then
imports instead of the `.py` files: the same code, typed as mypy checks it, without the
interpreter loop (about twice the signals per CPU-second; docs/benchmarks.md).

The build records a hash of each source it compiled (`_native_build.json`). Every compiled
module is loaded from its source instead when one of them no longer matches (a source was
edited after the build: the extension would silently run old code), when an extension is
missing, or when `EVALSTREAM_NATIVE=0` is set. It is all or nothing: compiled modules reach
into each other's objects directly, so a compiled module cannot run beside a pure one.

This module imports nothing of evalstream, so the build script can load it on its own.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

# The per-signal and per-episode paths: decode, assembly, engine, facts, records, the
# pipeline, scoring and its safety detectors. Modules that define pydantic models stay
# interpreted (pydantic inspects the signatures of their validators at class creation).
COMPILED: tuple[str, ...] = (
    "assertions.evaluation.assembly",
    "assertions.scores.baselines",
    "assertions.scores.decimal_round",
    "assertions.evaluation.engine",
    "assertions.evaluation.facts",
    "assertions.wire.llm_calls",
    "assertions.evaluation.matchers",
    "assertions.wire.patterns",
    "assertions.evaluation.records",
    "assertions.evaluation.results",
    "assertions.scores.safety",
    "assertions.scores.safety_gates",
    "assertions.scores.dimensions",
    "assertions.wire.signals",
    "assertions.evaluation.verdicts",
    "connectors.kafka.batched_output",
    "connectors.kafka.partitions",
    "stream.telemetry.fast_metrics",
    "stream.kafka_worker.partition_feed",
    "stream.pipeline",
)
GROUP = "assertions._native"  # mypyc's shared library: assertions/_native__mypyc.*.so
MANIFEST = "_native_build.json"  # next to this file
ENV = "EVALSTREAM_NATIVE"
ROOT = Path(__file__).resolve().parents[1]  # the directory holding the packages


def source_path(module: str, root: Path = ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def extension_path(module: str, root: Path = ROOT) -> Path:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]  # e.g. .cpython-311-x86_64-linux-gnu.so
    return root.joinpath(*module.split(".")).with_name(module.rsplit(".", 1)[-1] + suffix)


def source_hashes(modules: Sequence[str] = COMPILED, root: Path = ROOT) -> dict[str, str]:
    """SHA-256 of each module's source, in the order given (what a build records)."""
    return {m: hashlib.sha256(source_path(m, root).read_bytes()).hexdigest() for m in modules}


def read_manifest(root: Path = ROOT) -> dict[str, object] | None:
    try:
        loaded = json.loads((root / "assertions" / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def why_not_native(root: Path = ROOT, environ: dict[str, str] | None = None) -> str | None:
    """None when the compiled modules are current and complete, else why they cannot run."""
    env = os.environ if environ is None else environ
    if env.get(ENV, "") == "0":
        return f"{ENV}=0"
    manifest = read_manifest(root)
    if manifest is None:
        return "not compiled (run `make native`)"
    built = _as_dict(manifest.get("sources"))
    if list(built) != list(COMPILED):
        return "compiled for another module list (run `make native`)"
    missing = [m for m in COMPILED if not extension_path(m, root).exists()]
    if missing:
        return f"compiled module {missing[0]} is missing (run `make native`)"
    now = source_hashes(COMPILED, root)
    changed = [m for m in COMPILED if built[m] != now[m]]
    if changed:
        return f"out of date: {changed[0]} changed since the build (run `make native`)"
    return None


def _as_dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


class _FromSource:
    """Finds the compiled modules' `.py` sources ahead of their extensions (a meta path
    finder by its `find_spec`; not derived from importlib.abc, which every command would
    then load)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in COMPILED:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname, self.root))


@dataclass(frozen=True)
class Choice:
    implementation: str  # "native" or "pure"
    reason: str | None  # why not native (None when native)


@functools.cache
def select() -> Choice:
    """Decides once per process, before any compiled module is imported."""
    reason = why_not_native()
    if reason is None:
        return Choice("native", None)
    loaded = [m for m in COMPILED if m in sys.modules]
    if loaded:  # too late to choose: say so rather than run a mix
        raise ImportError(f"{loaded[0]} was imported before assertions.native.select()")
    sys.meta_path.insert(0, _FromSource(ROOT))
    if any(extension_path(m).exists() for m in COMPILED) and not reason.startswith(ENV):
        warnings.warn(
            f"evalstream: compiled modules not used, {reason}; running pure Python "
            f"(about half the speed; {ENV}=0 silences this)",
            RuntimeWarning,
            stacklevel=2,
        )
    return Choice("pure", reason)
