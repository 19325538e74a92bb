"""The worker's nightly crontab: registered on the leader, and the sweep it runs."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from evalstream.stream.kafka_worker.app import Worker
from evalstream.stream.settings import WorkerSettings
from tests.scoring.episodes import make_episode


def test_the_leader_runs_the_nightly_sweep_from_its_settings(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    source = tmp_path / "episodes.ndjson"
    source.write_text(
        "".join(
            json.dumps(make_episode(f"e{i}", cost=0.02, start=now - timedelta(hours=1, minutes=i)))
            + "\n"
            for i in range(6)
        )
    )
    nightly = tmp_path / "nightly.yaml"
    nightly.write_text(f"files: [{source}]\nsince: 24h\nout_dir: {tmp_path / 'reports'}\n")
    settings = WorkerSettings(
        data_dir=str(tmp_path / "data"), nightly=str(nightly), nightly_cron="*/5 * * * *"
    )
    worker = Worker(settings, [])
    assert asyncio.run(worker.run_nightly_sweep()) == 0
    reports = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert [name.rsplit(".", 1)[1] for name in reports] == ["json", "md"]
    run = json.loads((tmp_path / "reports" / reports[0]).read_text())
    assert len(run["episodes"]) == 6


def test_a_broken_nightly_file_is_logged_not_raised(tmp_path: Path) -> None:
    nightly = tmp_path / "nightly.yaml"
    nightly.write_text("since: [not, a, duration]\n")
    worker = Worker(WorkerSettings(data_dir=str(tmp_path / "d"), nightly=str(nightly)), [])
    assert asyncio.run(worker.run_nightly_sweep()) == 2
