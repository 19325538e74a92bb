"""Packages that re-export their modules' names import each one on first use
(evalstream/assertions/lazy_exports.py): the name resolves to its module's object, is kept once
imported, is listed by dir(), and an unknown name is an AttributeError naming the package."""

from __future__ import annotations

import json
from typing import Any

import pytest

import evalstream.assertions.evalruns
from evalstream import assertions
from evalstream.assertions.lazy_exports import lazy_exports


def test_a_name_is_imported_from_its_home_and_kept() -> None:
    namespace: dict[str, Any] = {}
    attribute, names = lazy_exports("pkg", namespace, {"json": ("dumps", "loads")})
    assert "dumps" not in namespace
    assert attribute("dumps") is json.dumps
    assert namespace == {"dumps": json.dumps}
    assert names() == ["dumps", "loads"]


def test_an_unknown_name_is_an_attribute_error_naming_the_package() -> None:
    attribute, _ = lazy_exports("pkg", {}, {"json": ("dumps",)})
    with pytest.raises(AttributeError, match=r"module 'pkg' has no attribute 'nope'"):
        attribute("nope")


@pytest.mark.parametrize("package", [assertions, evalstream.assertions.evalruns])
def test_every_public_name_of_the_packages_resolves(package: Any) -> None:
    for name in package.__all__:
        assert getattr(package, name) is vars(package)[name]
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError, match=f"module '{package.__name__}' has no attribute"):
        package.no_such_name  # noqa: B018
