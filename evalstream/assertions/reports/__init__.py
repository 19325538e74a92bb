"""Renderers of check results: JSON (a stable contract), Markdown and JUnit XML."""
