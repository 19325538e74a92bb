"""Edges to the outside world: files, Kafka, HTTP, model providers."""

# Some modules of connectors/ are compiled with those of assertions/: the choice between
# compiled and pure Python (assertions.native) is made when `assertions` is imported.
import assertions  # noqa: F401
