"""Prometheus metrics of the gateway, on an injected registry (no process globals).

Labels are bounded: the endpoint is the route template, never a path with ids; reasons are
the stable rejection codes.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.process_collector import ProcessCollector

PUBLISH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class GatewayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        if process:
            ProcessCollector(registry=r)
        self.requests = Counter(
            "evalstream_gateway_requests",
            "HTTP requests by endpoint and status code.",
            ["endpoint", "status"],
            registry=r,
        )
        self.rejections = Counter(
            "evalstream_gateway_rejections",
            "Requests refused (4xx/503) by endpoint and reason code.",
            ["endpoint", "reason"],
            registry=r,
        )
        self.request_bytes = Counter(
            "evalstream_gateway_request_bytes",
            "Request body bytes received (before decompression).",
            ["endpoint"],
            registry=r,
        )
        self.published = Counter(
            "evalstream_gateway_published_records",
            "Records acknowledged by the publisher, by stream.",
            ["stream"],
            registry=r,
        )
        self.published_bytes = Counter(
            "evalstream_gateway_published_bytes",
            "Bytes of records acknowledged by the publisher.",
            registry=r,
        )
        self.publish_latency = Histogram(
            "evalstream_gateway_publish_latency_seconds",
            "Time from handing a request's records to the publisher to their acknowledgement.",
            buckets=PUBLISH_BUCKETS,
            registry=r,
        )
        self.redactions = Counter(
            "evalstream_gateway_redactions",
            "Secrets redacted before publishing, by kind.",
            ["kind"],
            registry=r,
        )
        self.proxy_calls = Counter(
            "evalstream_gateway_proxy_calls",
            "Calls through the recording proxy by outcome (ok, upstream_error, unreachable).",
            ["outcome", "stream"],
            registry=r,
        )
        self.proxy_record_failures = Counter(
            "evalstream_gateway_proxy_record_failures",
            "Proxied calls whose recording could not be published.",
            registry=r,
        )
        self.proxy_upstream_latency = Histogram(
            "evalstream_gateway_proxy_upstream_seconds",
            "Upstream time of a proxied call, to the last byte.",
            buckets=(*PUBLISH_BUCKETS, 30, 60, 120, 300),
            registry=r,
        )
