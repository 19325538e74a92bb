"""A thin layer over grafana-foundation-sdk: a dashboard with numbered panels, PromQL helpers.

Panels are laid out left to right in rows of 24 columns; ids and query ref ids are assigned
in order, so regenerating the same code gives the same JSON byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.builders.common import StackingConfig
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import StackingMode
from grafana_foundation_sdk.models.dashboard import DataSourceRef, GridPos, VariableRefresh

JSON = Any
DATASOURCE_UID = "evalstream-prometheus"  # the uid of the provisioned Prometheus datasource
RATE = "$__rate_interval"  # Grafana's window for rate(): at least four scrape intervals
GRID_COLUMNS = 24
REF_IDS = "ABCDEFGH"


@dataclass(frozen=True)
class Query:
    """One PromQL query; `exemplars` also asks Prometheus for the exemplars of the series it
    selects (per-episode counters and histogram buckets name their latest episode)."""

    expr: str
    legend: str = ""
    exemplars: bool = False


def by(labels: Sequence[str]) -> str:
    return f" by ({', '.join(labels)})" if labels else ""


def selector(metric: str, labels: str = "") -> str:
    return f"{metric}{{{labels}}}" if labels else metric


def rate(metric: str, labels: str = "", group: Sequence[str] = ()) -> str:
    """Per-second rate of a counter, summed over workers."""
    return f"sum{by(group)} (rate({selector(metric, labels)}[{RATE}]))"


def quantile(q: float, histogram: str, labels: str = "", group: Sequence[str] = ()) -> str:
    """A quantile of a histogram over the rate window, across workers."""
    buckets = selector(f"{histogram}_bucket", labels)
    return f"histogram_quantile({q}, sum{by(['le', *group])} (rate({buckets}[{RATE}])))"


def mean(histogram: str, labels: str = "", group: Sequence[str] = ()) -> str:
    """The mean observation of a histogram over the rate window."""
    return (
        f"{rate(f'{histogram}_sum', labels, group)} / {rate(f'{histogram}_count', labels, group)}"
    )


class Board:
    """One dashboard being built: rows, then panels flowing left to right."""

    def __init__(
        self,
        uid: str,
        title: str,
        description: str,
        *,
        datasource_uid: str = DATASOURCE_UID,
    ) -> None:
        self.datasource = DataSourceRef(type_val="prometheus", uid=datasource_uid)
        self.builder = (
            dashboard.Dashboard(title)
            .uid(uid)
            .description(description)
            .tags(["evalstream"])
            .time("now-1h", "now")
            .refresh("30s")
            .timezone("browser")
            .editable()
        )
        self._next_id = 1
        self._x = 0
        self._y = 0
        self._row_height = 0

    def _id(self) -> int:
        value = self._next_id
        self._next_id += 1
        return value

    def _place(self, width: int, height: int) -> GridPos:
        if self._x + width > GRID_COLUMNS:
            self._x, self._y, self._row_height = 0, self._y + self._row_height, 0
        pos = GridPos(h=height, w=width, x=self._x, y=self._y)
        self._x += width
        self._row_height = max(self._row_height, height)
        return pos

    def row(self, title: str) -> Board:
        self._x, self._y = 0, self._y + self._row_height
        row = dashboard.Row(title).id(self._id()).grid_pos(GridPos(h=1, w=24, x=0, y=self._y))
        self.builder.with_row(row)
        self._y += 1
        self._row_height = 0
        return self

    def variable(self, name: str, label: str, metric: str) -> Board:
        """A multi-value filter on a label, listing the values `metric` has."""
        self.builder.with_variable(
            dashboard.QueryVariable(name)
            .label(label)
            .query(f"label_values({metric}, {name})")
            .datasource(self.datasource)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        )
        return self

    def _targets(self, queries: Sequence[Query], *, instant: bool) -> list[prometheus.Dataquery]:
        out = []
        for ref, q in zip(REF_IDS, queries, strict=False):
            target = prometheus.Dataquery().expr(q.expr).ref_id(ref)
            if q.legend:
                target = target.legend_format(q.legend)
            if q.exemplars:
                target = target.exemplar(True)
            out.append(target.instant() if instant else target.range())
        return out

    def timeseries(
        self,
        title: str,
        description: str,
        queries: Sequence[Query],
        *,
        unit: str = "short",
        width: int = 12,
        height: int = 8,
        stacked: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
    ) -> Board:
        panel = (
            timeseries.Panel()
            .id(self._id())
            .title(title)
            .description(description)
            .datasource(self.datasource)
            .unit(unit)
            .grid_pos(self._place(width, height))
            .fill_opacity(15 if stacked else 5)
            .line_width(1)
        )
        if stacked:
            panel = panel.stacking(StackingConfig().mode(StackingMode.NORMAL))
        if min_value is not None:
            panel = panel.min(min_value)
        if max_value is not None:
            panel = panel.max(max_value)
        for target in self._targets(queries, instant=False):
            panel = panel.with_target(target)
        self.builder.with_panel(panel)
        return self

    def stat(
        self,
        title: str,
        description: str,
        query: Query,
        *,
        unit: str = "short",
        width: int = 4,
        height: int = 4,
        decimals: int | None = None,
    ) -> Board:
        panel = (
            stat.Panel()
            .id(self._id())
            .title(title)
            .description(description)
            .datasource(self.datasource)
            .unit(unit)
            .grid_pos(self._place(width, height))
        )
        if decimals is not None:
            panel = panel.decimals(decimals)
        for target in self._targets([query], instant=True):
            panel = panel.with_target(target)
        self.builder.with_panel(panel)
        return self

    def to_json(self) -> dict[str, JSON]:
        data: dict[str, JSON] = json.loads(json.dumps(self.builder.build(), cls=JSONEncoder))
        return data


def render(data: dict[str, JSON]) -> str:
    """The committed form: sorted keys, two-space indent, a final newline."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
