"""`--otlp-endpoint` and `--otlp-mode`, declared without the exporter: a command's `--help`
and start-up do not load httpx or the OTLP encoder (tests/cli/test_startup.py)."""

from __future__ import annotations

from collections.abc import Callable

import click

# The exporter's modes (evalstream.connectors.otel_export.otlp_export.MODES; a unit test keeps the
# two equal).
OTLP_MODES = ("logs", "spans")
ENDPOINT_HELP = (
    "Also export verdicts and scores as OpenTelemetry `gen_ai.evaluation.result` events to "
    "this OTLP/HTTP endpoint (a base URL, /v1/logs or /v1/traces appended, or the full URL); "
    "OTEL_EXPORTER_OTLP_* settings apply, this flag wins over their endpoint."
)
MODE_HELP = (
    "logs: OTLP log records (the conventions' events); spans: zero-duration child spans of "
    "the evaluated spans, for backends that only take traces (Phoenix, Langfuse). Giving "
    "only the mode exports to the OTEL_EXPORTER_OTLP_* endpoint. [default: logs]"
)


def otlp_options(func: Callable[..., None]) -> Callable[..., None]:
    """`--otlp-endpoint URL` and `--otlp-mode logs|spans`."""
    func = click.option("--otlp-mode", type=click.Choice(OTLP_MODES), help=MODE_HELP)(func)
    return click.option("--otlp-endpoint", metavar="URL", help=ENDPOINT_HELP)(func)
