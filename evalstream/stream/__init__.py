"""Composition: the runtimes (offline check, embedded, Faust worker), metrics and the CLI."""
