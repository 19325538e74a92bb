"""A package's public names imported from their modules on first use (PEP 562).

A package `__init__` that re-exports its modules' names would otherwise import all of them as
soon as any one module of the package is imported (a command line that only prints its help).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, namespace: dict[str, Any], homes: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`: `homes` maps each module to the names it
    provides; a name, once imported, is kept in `namespace` (the package's `globals()`)."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def attribute(name: str) -> object:
        home = home_of.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted(set(namespace) | set(home_of))

    return attribute, names
