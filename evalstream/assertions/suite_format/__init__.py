"""Suites: the YAML format, its loading with positions, and its JSON Schema."""
