"""Seed 001's skill-eval file schemas (see `assertions.seed001.models`)."""
