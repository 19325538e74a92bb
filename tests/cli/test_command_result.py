"""A command's coroutine result reaches the command without being formatted on the way."""

from __future__ import annotations

import pytest

from evalstream.assertions.errors import InputError
from evalstream.stream.commands.scoring import _run
from evalstream.stream.commands.user_error import UserError


class _Result:
    """Counts its reprs: a whole score run's repr costs as much as scoring it."""

    reprs = 0

    def __repr__(self) -> str:
        type(self).reprs += 1
        return "_Result()"


async def _produce() -> _Result:
    return _Result()


async def _fail() -> None:
    raise InputError("bad input: fix it")


def test_result_returned_and_never_repr() -> None:
    _Result.reprs = 0
    result = _run(_produce())
    assert isinstance(result, _Result)
    assert _Result.reprs == 0


def test_input_error_becomes_a_user_error() -> None:
    with pytest.raises(UserError, match="bad input: fix it"):
        _run(_fail())
