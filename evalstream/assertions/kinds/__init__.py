"""Assertion families: specs, incremental evaluators and reference evaluators, side by side."""
