"""Grafana dashboards as code (grafana-foundation-sdk); `python -m evalstream.stream.dashboards`
writes them to deploy/grafana/dashboards/. Generating them is a development task: the library comes
with the `dashboards` (or `dev`) extra, not with evalstream itself."""

try:
    import grafana_foundation_sdk  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "generating the dashboards needs grafana-foundation-sdk: "
        "pip install 'evalstream[dashboards]' (the generated JSON ships in deploy/grafana/)"
    ) from exc

from evalstream.stream.dashboards.generate import DASHBOARDS, generate, render

__all__ = ["DASHBOARDS", "generate", "render"]
