"""Grafana dashboards as code (grafana-foundation-sdk); `python -m stream.dashboards` writes
them to deploy/grafana/dashboards/."""

from stream.dashboards.generate import DASHBOARDS, generate, render

__all__ = ["DASHBOARDS", "generate", "render"]
