"""The lock-free families expose what prometheus_client's Counter and Histogram expose for the
same updates (every sample but the `_created` timestamps)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from evalstream.stream.telemetry.fast_metrics import LabelledCounter, LabelledHistogram

VALUES = [-60.0, -50.0, -0.5, 0.0, 0.01, 0.05, 0.3, 1.0, 7.5, 250.0, 1e9]


def _samples(registry: CollectorRegistry) -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
    return sorted(
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    )


def test_counter_exposition_matches_prometheus_client() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    fast = LabelledCounter("x_events", "Events.", ["kind", "early"], ours)
    slow = Counter("x_events", "Events.", ["kind", "early"], registry=theirs)
    fast.touch(("idle", "false"))
    slow.labels("idle", "false")
    for i, kind in enumerate(["a", "b", "a", "c", "a"]):
        fast.inc((kind, str(i % 2 == 0)), 1.0 + i)
        slow.labels(kind, str(i % 2 == 0)).inc(1.0 + i)
    assert _samples(ours) == _samples(theirs)


def test_histogram_exposition_matches_prometheus_client() -> None:
    for buckets in [(0.01, 0.05, 0.1, 1, 10), (-50, -10, 0, 10, 200)]:  # negative: no _sum
        ours, theirs = CollectorRegistry(), CollectorRegistry()
        fast = LabelledHistogram("x_seconds", "Durations.", ["type"], buckets, ours)
        slow = Histogram("x_seconds", "Durations.", ["type"], buckets=buckets, registry=theirs)
        for i, value in enumerate(VALUES):
            kind = "odd" if i % 2 else "even"
            fast.observe((kind,), value)
            slow.labels(kind).observe(value)
        assert _samples(ours) == _samples(theirs), buckets
