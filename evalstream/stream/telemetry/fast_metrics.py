"""Labelled counters and histograms for the per-episode path, read by Prometheus at scrape time.

prometheus_client's `Counter` and `Histogram` take a lock and validate on every update, and
`labels()` does so again: ~3 µs per observation, and a closed episode makes ~40 of them (a
verdict counter per assertion, a lead time per early verdict, the scores), which was about
a third of closing one. These keep plain dicts of numbers, updated without locks, and turn
them into metric families only when the registry is collected; the exposition (names,
labels, buckets, sums) is the same.

Updates and collection may run on different threads (the worker's /metrics server): a
collection copies each dict in one C call, under the GIL, before reading it.

An update may name the episode behind it (`evalstream.stream.telemetry.exemplars.EpisodeExemplar`):
each counter series, and each histogram bucket, keeps the latest one as its OpenMetrics exemplar, as
prometheus_client's `inc(exemplar=…)` / `observe(exemplar=…)` do.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Exemplar, Sample
from prometheus_client.utils import floatToGoString

from evalstream.stream.telemetry.exemplars import EpisodeExemplar

Labels = tuple[str, ...]


class LabelledCounter:
    """A counter family: `inc(("suite", "type"), n)`; exposed as `<name>_total`."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = list(labelnames)
        self._values: dict[Labels, float] = {}
        self._exemplars: dict[Labels, tuple[EpisodeExemplar, float]] = {}
        registry.register(self)

    def inc(
        self, labels: Labels, amount: float = 1.0, exemplar: EpisodeExemplar | None = None
    ) -> None:
        values = self._values
        values[labels] = values.get(labels, 0.0) + amount
        if exemplar is not None:
            self._exemplars[labels] = (exemplar, amount)

    def touch(self, labels: Labels) -> None:
        """Makes the series exist at 0 (a bounded label set shown from the start)."""
        self._values.setdefault(labels, 0.0)

    def describe(self) -> list[Metric]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        exemplars = dict(self._exemplars)
        for labels, value in sorted(dict(self._values).items()):
            held = exemplars.get(labels)
            family.add_metric(list(labels), value, exemplar=_exemplar(held))
        yield family


class LabelledHistogram:
    """A histogram family: `observe(("type",), seconds)`; buckets as prometheus_client's
    (upper bounds inclusive, +Inf last)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = list(labelnames)
        upper = [float(b) for b in buckets]
        if not upper or upper[-1] != math.inf:
            upper.append(math.inf)
        self.upper = upper
        # Per series: a count per bucket (not cumulative), then the sum of the observations.
        self._series: dict[Labels, list[float]] = {}
        # Per series: the latest exemplar of each bucket (not cumulative), with its value.
        self._exemplars: dict[Labels, list[tuple[EpisodeExemplar, float] | None]] = {}
        registry.register(self)

    def observe(
        self, labels: Labels, value: float, exemplar: EpisodeExemplar | None = None
    ) -> None:
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = [0.0] * (len(self.upper) + 1)
        bucket = bisect.bisect_left(self.upper, value)
        series[bucket] += 1.0
        series[-1] += value
        if exemplar is not None:
            held = self._exemplars.get(labels)
            if held is None:
                held = self._exemplars[labels] = [None] * len(self.upper)
            held[bucket] = (exemplar, value)

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        names = [floatToGoString(u) for u in self.upper]  # type: ignore[no-untyped-call]
        all_exemplars = dict(self._exemplars)
        for labels, series in sorted(dict(self._series).items()):
            counts = list(series)  # one copy: the buckets and the sum agree
            held = all_exemplars.get(labels)
            exemplars = list(held) if held is not None else [None] * len(names)
            cumulative = 0.0
            buckets: list[tuple[str, float] | tuple[str, float, Exemplar]] = []
            for name, count, ex in zip(names, counts, exemplars, strict=False):
                cumulative += count
                if ex is None:
                    buckets.append((name, cumulative))
                else:
                    episode, observed = ex
                    exemplar = Exemplar(episode.labels, observed, episode.timestamp)
                    buckets.append((name, cumulative, exemplar))
            if self.upper[0] >= 0:
                family.add_metric(list(labels), buckets, counts[-1])
            else:  # as prometheus_client: with negative buckets a count but no sum
                family.add_metric(list(labels), buckets, None)
                family.samples.append(
                    Sample(
                        f"{self.name}_count",
                        dict(zip(self.labelnames, labels, strict=True)),
                        cumulative,
                    )
                )
        yield family


def _exemplar(held: tuple[EpisodeExemplar, float] | None) -> Exemplar | None:
    if held is None:
        return None
    episode, value = held
    return Exemplar(episode.labels, value, episode.timestamp)
