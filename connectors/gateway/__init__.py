"""The gateway connector: ingest API, OTLP GenAI traces and a recording Anthropic proxy."""

from connectors.gateway.app import create_gateway_app
from connectors.gateway.auth import TokenStore
from connectors.gateway.errors import Rejected, Unavailable
from connectors.gateway.kafka_publisher import KafkaPublisher
from connectors.gateway.metrics import GatewayMetrics
from connectors.gateway.publisher import MemoryPublisher, OutRecord, Publisher
from connectors.gateway.settings import GatewaySettings, load_gateway_settings

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
