"""Composition: the runtimes (offline check, embedded, Faust worker), metrics and the CLI."""

# The hot-path modules of stream/ are compiled with those of assertions/: the choice between
# compiled and pure Python (assertions.native) is made when `assertions` is imported.
import assertions  # noqa: F401
