"""Edges to the outside world: files, Kafka, HTTP, model providers."""
