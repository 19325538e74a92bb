"""Alerts: per-episode alert rules and windowed regression detection (CUSUM)."""
