"""The generated dashboards: committed JSON is fresh, the grid is sound, metrics exist."""

from __future__ import annotations

import json
import re
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from evalstream.stream.dashboards import DASHBOARDS, generate
from evalstream.stream.dashboards.__main__ import main as dashboards_main
from evalstream.stream.telemetry.metrics import PipelineMetrics

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "deploy" / "grafana" / "dashboards"
PROVISIONED_UID = "evalstream-prometheus"
JSON = Any


def dashboards() -> dict[str, dict[str, JSON]]:
    return {name: json.loads(text) for name, text in generate().items()}


def panels(board: dict[str, JSON]) -> list[dict[str, JSON]]:
    return list(board["panels"])


def test_committed_json_is_what_the_code_generates() -> None:
    generated = generate()
    committed = {p.name: p.read_text(encoding="utf-8") for p in COMMITTED.glob("*.json")}
    assert set(committed) == set(generated) == set(DASHBOARDS)
    stale = [name for name in generated if committed[name] != generated[name]]
    assert not stale, f"stale dashboards {stale}: run `python -m evalstream.stream.dashboards`"


def test_the_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    assert dashboards_main(["--out", str(tmp_path)]) == 0
    assert dashboards_main(["--out", str(tmp_path), "--check"]) == 0
    board = tmp_path / "scores.json"
    board.write_text(board.read_text().replace("Safety", "Safty"))
    assert dashboards_main(["--out", str(tmp_path), "--check"]) == 1


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_layout_fits_the_grid_without_overlaps_and_ids_are_unique(name: str) -> None:
    board = dashboards()[name]
    ps = panels(board)
    ids = [p["id"] for p in ps]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {name}"
    titles = [p["title"] for p in ps]
    assert len(titles) == len(set(titles)), f"duplicate panel titles in {name}"
    boxes = []
    for p in ps:
        g = p["gridPos"]
        assert min(g["x"], g["y"]) >= 0, p["title"]
        assert min(g["w"], g["h"]) >= 1, p["title"]
        assert g["x"] + g["w"] <= 24, f"{p['title']} leaves the 24-column grid"
        boxes.append((p["title"], g["x"], g["y"], g["x"] + g["w"], g["y"] + g["h"]))
    for a, b in combinations(boxes, 2):
        overlap = a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
        assert not overlap, f"{a[0]!r} overlaps {b[0]!r} in {name}"
    # The dashboard starts with a row header.
    rows = [p for p in ps if p["type"] == "row"]
    assert rows
    assert rows[0]["gridPos"]["y"] == 0


def test_every_panel_queries_the_provisioned_prometheus() -> None:
    uids = set()
    for name, board in dashboards().items():
        uids.add(board["uid"])
        for p in panels(board):
            if p["type"] == "row":
                continue
            assert p["datasource"] == {"type": "prometheus", "uid": PROVISIONED_UID}, p["title"]
            assert p["targets"], f"{name}: {p['title']} has no query"
            refs = [t["refId"] for t in p["targets"]]
            assert len(refs) == len(set(refs)), p["title"]
            assert all(refs), p["title"]
            assert p["description"], f"{name}: {p['title']} has no description"
    assert len(uids) == len(DASHBOARDS)
    provisioning = (
        REPO / "deploy" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
    ).read_text()
    assert f"uid: {PROVISIONED_UID}" in provisioning


def known_series() -> set[str]:
    """Every series name evalstream/stream/telemetry/metrics.py can export, plus Prometheus' own."""
    names = {"up"}
    registry = PipelineMetrics().registry
    for family in registry.collect():
        suffixes = {
            "counter": ["_total"],
            "histogram": ["_bucket", "_sum", "_count"],
        }.get(family.type, [""])
        names.update(family.name + s for s in suffixes)
    return names


def test_queries_name_only_metrics_that_exist() -> None:
    known = known_series()
    assert "evalstream_episode_score_bucket" in known
    for board in dashboards().values():
        for p in panels(board):
            for t in p.get("targets", []):
                for metric in re.findall(r"\b((?:evalstream|process)_[a-z_]+)\b", t["expr"]):
                    assert metric in known, f"{p['title']}: unknown metric {metric}"


# Series that carry exemplars naming an episode (evalstream/stream/telemetry/fast_metrics.py,
# per-episode families).
EXEMPLAR_SERIES = (
    "evalstream_episodes_closed_total",
    "evalstream_verdicts_total",
    "evalstream_episode_alerts_total",
    "evalstream_early_verdict_lead_seconds_bucket",
    "evalstream_episode_score_bucket",
    "evalstream_baseline_delta_percent_bucket",
)


def test_per_episode_panels_show_exemplars_from_series_that_have_them() -> None:
    shown: set[str] = set()
    for board in dashboards().values():
        for p in panels(board):
            targets = p.get("targets", [])
            with_exemplars = [t for t in targets if t.get("exemplar")]
            for t in with_exemplars:
                assert p["type"] == "timeseries", p["title"]  # a stat panel cannot show them
                series = [s for s in EXEMPLAR_SERIES if re.search(rf"\b{s}\b", t["expr"])]
                assert series, f"{p['title']}: exemplars asked of {t['expr']}"
                shown.update(series)
            plots_one = any(
                re.search(rf"\b{s}\b", t["expr"]) for t in targets for s in EXEMPLAR_SERIES
            )
            if p["type"] == "timeseries" and plots_one:
                assert with_exemplars, f"{p['title']} plots per-episode series without exemplars"
    assert shown == set(EXEMPLAR_SERIES)
