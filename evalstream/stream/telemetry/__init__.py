"""The runtimes' Prometheus metrics: the registry's families, the fast per-episode counters
and their exemplars."""
