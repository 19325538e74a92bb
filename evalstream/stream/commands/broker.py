"""The broker a Kafka command talks to: `--broker`, else the settings (EVALSTREAM_BROKER)."""

from __future__ import annotations

import os

from evalstream.assertions.errors import InputError
from evalstream.stream.commands.user_error import UserError
from evalstream.stream.settings import load_settings


def broker_address(broker: str | None) -> str:
    try:
        return load_settings(None, os.environ, {"broker": broker}).broker
    except InputError as exc:
        raise UserError(str(exc)) from exc
