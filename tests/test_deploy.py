"""The deployment files: docker-compose.yml validates and wires the worker as documented."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def test_compose_file_validates_with_a_real_compose_implementation() -> None:
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose is not installed: run scripts/system-deps.sh")
    proc = subprocess.run(
        [compose, "config", "-q"], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_compose_stack_creates_topics_before_two_workers() -> None:
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    assert {"kafka", "topics", "worker-1", "worker-2"} <= set(services)
    kafka_env = services["kafka"]["environment"]
    assert kafka_env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert services["topics"]["command"] == ["topics"]
    for worker in ("worker-1", "worker-2"):
        assert (
            services[worker]["depends_on"]["topics"]["condition"]
            == "service_completed_successfully"
        )
        suites = services[worker]["environment"]["EVALSTREAM_SUITES"].split(",")
        for suite in suites:
            assert (REPO / suite.removeprefix("/app/")).exists(), suite
