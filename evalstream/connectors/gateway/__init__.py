"""The gateway connector: ingest API, OTLP GenAI traces and a recording Anthropic proxy."""

from evalstream.connectors.gateway.app import create_gateway_app
from evalstream.connectors.gateway.auth import TokenStore
from evalstream.connectors.gateway.errors import Rejected, Unavailable
from evalstream.connectors.gateway.kafka_publisher import KafkaPublisher
from evalstream.connectors.gateway.metrics import GatewayMetrics
from evalstream.connectors.gateway.publisher import MemoryPublisher, OutRecord, Publisher
from evalstream.connectors.gateway.settings import GatewaySettings, load_gateway_settings

__all__ = [
    "GatewayMetrics",
    "GatewaySettings",
    "KafkaPublisher",
    "MemoryPublisher",
    "OutRecord",
    "Publisher",
    "Rejected",
    "TokenStore",
    "Unavailable",
    "create_gateway_app",
    "load_gateway_settings",
]
