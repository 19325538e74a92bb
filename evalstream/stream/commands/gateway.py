"""`evalstream gateway` (the HTTP gateway on Kafka) and `evalstream gateway-token`.

The gateway's modules (FastAPI, uvicorn, protobuf) load only when a gateway command runs, so
every other command starts without them.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from evalstream.assertions.errors import InputError
from evalstream.stream.commands.user_error import UserError

if TYPE_CHECKING:
    from evalstream.connectors.gateway import GatewaySettings


def embedded_gateway_settings(port: int) -> GatewaySettings:
    """Settings of the gateway inside `evalstream up`: anonymous unless tokens are set."""
    from evalstream.connectors.gateway import load_gateway_settings  # see the docstring

    try:
        settings = load_gateway_settings(None, os.environ, {"port": port})
        if not settings.tokens_file and not settings.tokens:
            settings = settings.model_copy(update={"allow_anonymous": True})
    except InputError as exc:
        raise UserError(str(exc)) from exc
    return settings


def register(group: click.Group) -> None:
    @group.command()
    @click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False),
        help="Gateway settings YAML (keys as in docs/gateway.md).",
    )
    @click.option("--host", help="Interface (EVALSTREAM_GATEWAY_HOST; default 127.0.0.1).")
    @click.option("--port", type=int, help="Port (EVALSTREAM_GATEWAY_PORT; default 8788).")
    @click.option("--broker", help="Kafka bootstrap servers (EVALSTREAM_BROKER).")
    @click.option("--topic-prefix", help="Topic name prefix (EVALSTREAM_TOPIC_PREFIX).")
    @click.option(
        "--tokens-file",
        type=click.Path(exists=True, dir_okay=False),
        help="Tenants and token hashes (EVALSTREAM_GATEWAY_TOKENS_FILE).",
    )
    @click.option(
        "--anthropic-upstream",
        help="Where the Messages API proxy forwards (EVALSTREAM_GATEWAY_ANTHROPIC_UPSTREAM).",
    )
    @click.option(
        "--allow-anonymous",
        is_flag=True,
        default=None,
        help="Accept requests without a token (no tenants; for local use only).",
    )
    @click.option("--log-level", default="warning", show_default=True)
    def gateway(config_file: str | None, log_level: str, **overrides: Any) -> None:
        """Serve the HTTP gateway: ingest API, OTLP traces, Anthropic recording proxy.

        Every accepted request was acknowledged by Kafka (acks=all) before the answer."""
        import uvicorn  # only this command serves HTTP

        from evalstream.connectors.gateway import (  # see the module docstring
            KafkaPublisher,
            create_gateway_app,
            load_gateway_settings,
        )

        try:
            settings = load_gateway_settings(config_file, os.environ, overrides)
            publisher = KafkaPublisher(
                settings.broker,
                settings.topic,
                publish_timeout_s=settings.publish_timeout_s,
                buffer_bytes=settings.buffer_bytes,
            )
            app = create_gateway_app(settings, publisher)
        except InputError as exc:
            raise UserError(str(exc)) from exc
        click.echo(
            f"evalstream gateway on http://{settings.host}:{settings.port} "
            f"-> Kafka {settings.broker} (topics {settings.topic_prefix}signals, "
            f"{settings.topic_prefix}llm-calls)",
            err=True,
        )
        # Startup made ~200,000 long-lived objects (modules, the app, pydantic models); a
        # full collection scanned them all (100+ ms, a latency spike). Frozen, it skips them.
        gc.collect()
        gc.freeze()
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_level=log_level,
            access_log=False,  # paths carry episode ids; the metrics count requests instead
        )

    @group.command("gateway-token")
    @click.argument("tenant")
    def gateway_token(tenant: str) -> None:
        """Make a new random token for TENANT; prints the token and its tokens-file line.

        Give the token to the tenant; put only the hash in the gateway's tokens file."""
        from evalstream.connectors.gateway.auth import TENANT_RE, new_token, stored_form

        if not TENANT_RE.match(tenant):
            raise UserError(
                f"tenant {tenant!r}: use 1-64 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        token = new_token()
        sys.stdout.write(
            f"token: {token}\n"
            "tokens file entry:\n"
            f"tenants:\n  {tenant}:\n    - {stored_form(token)}\n"
        )
