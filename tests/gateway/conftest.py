"""Fixtures of the gateway tests: apps on a memory publisher, the Messages API test server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from evalstream.connectors.gateway import GatewaySettings, MemoryPublisher, create_gateway_app
from tests.gateway.live import LiveServer, token_env
from tests.support.messages_api import messages_api  # noqa: F401 - re-exported fixture

AppFactory = Callable[..., tuple[Any, MemoryPublisher]]


@pytest.fixture
def make_app() -> AppFactory:
    """Builds a gateway app with the test tenants on a fresh memory publisher."""

    def make(**settings: Any) -> tuple[Any, MemoryPublisher]:
        publisher = MemoryPublisher()
        options: dict[str, Any] = {"tokens": token_env(), **settings}
        if options.get("allow_anonymous"):
            options.pop("tokens")
        return create_gateway_app(GatewaySettings(**options), publisher), publisher

    return make


@pytest.fixture
def live_gateway(
    make_app: AppFactory,
) -> Iterator[Callable[..., tuple[LiveServer, MemoryPublisher]]]:
    """Starts gateways (uvicorn, real sockets) on memory publishers; stops them after the test."""
    servers: list[LiveServer] = []

    def start(**settings: Any) -> tuple[LiveServer, MemoryPublisher]:
        app, publisher = make_app(**settings)
        server = LiveServer(app).__enter__()
        servers.append(server)
        return server, publisher

    yield start
    for server in servers:
        server.__exit__(None, None, None)
