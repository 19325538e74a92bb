"""The deployment files: docker-compose.yml validates and wires the worker as documented."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def services() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    return loaded


def binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run scripts/system-deps.sh")
    return found


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


def test_the_stack_has_every_service() -> None:
    assert {
        "kafka",
        "topics",
        "worker-1",
        "worker-2",
        "gateway",
        "prometheus",
        "alertmanager",
        "grafana",
    } <= set(services())


def test_every_mounted_file_exists() -> None:
    mounts = 0
    for name, service in services().items():
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            if source.startswith("./"):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"
                mounts += 1
    assert mounts >= 4


def test_prometheus_scrapes_the_compose_services_and_loads_the_rules() -> None:
    config = yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())
    jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in config["scrape_configs"]}
    svc = services()
    for target in jobs["evalstream-worker"] + jobs["evalstream-gateway"]:
        host, port = target.split(":")
        assert host in svc, target
        env = svc[host].get("environment", {})
        command = " ".join(svc[host].get("command", []))
        assert port in (env.get("EVALSTREAM_METRICS_PORT"), "8080"), target
        if host == "gateway":
            assert f"--port {port}" in command
    [manager] = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert manager.split(":")[0] in svc
    promtool = binary("promtool")
    for name in ("prometheus.yml", "prometheus.local.yml"):
        proc = run_tool(promtool, "check", "config", f"deploy/prometheus/{name}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "rules found" in proc.stdout  # the rule files were found and parsed


def test_alert_rules_pass_their_unit_tests() -> None:
    promtool = binary("promtool")
    rules = sorted(
        str(p.relative_to(REPO)) for p in (REPO / "deploy/prometheus/rules").glob("*.yml")
    )
    tests = sorted(
        str(p.relative_to(REPO)) for p in (REPO / "deploy/prometheus/tests").glob("*.yml")
    )
    checked = run_tool(promtool, "check", "rules", *rules)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = run_tool(promtool, "test", "rules", *tests)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_alertmanager_config_is_valid() -> None:
    proc = run_tool(binary("amtool"), "check-config", "deploy/alertmanager/alertmanager.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_grafana_loads_the_generated_dashboards_from_its_mount() -> None:
    grafana = services()["grafana"]
    mounts = {str(v).split(":")[0]: str(v).split(":")[1] for v in grafana["volumes"]}
    target = mounts["./deploy/grafana/dashboards"]
    provider = yaml.safe_load(
        (REPO / "deploy/grafana/provisioning/dashboards/evalstream.yml").read_text()
    )
    assert provider["providers"][0]["options"]["path"] == target
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (REPO / "deploy/grafana/dashboards" / Path(home).name).exists()
    datasource = yaml.safe_load(
        (REPO / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text()
    )["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090"
    assert "prometheus" in services()


def test_exemplars_are_stored_and_grafana_links_them_to_the_trace_and_the_episode() -> None:
    svc = services()
    assert "--enable-feature=exemplar-storage" in svc["prometheus"]["command"]
    datasource = yaml.safe_load(
        (REPO / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text()
    )["datasources"][0]
    links = {d["name"]: d for d in datasource["jsonData"]["exemplarTraceIdDestinations"]}
    assert set(links) == {"trace_id", "episode_id"}
    # Both come from Grafana's environment (expanded at provisioning), set through compose.
    env = svc["grafana"]["environment"]
    trace_var = re.fullmatch(r"\$\{(\w+)\}", links["trace_id"]["datasourceUid"])
    episode_var = re.fullmatch(r"\$\{(\w+)\}", links["episode_id"]["url"])
    assert trace_var
    assert episode_var
    assert trace_var[1] in env
    assert episode_var[1] in env


def healthcheck_code(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"], test  # no curl in the image
    code: str = test[3]
    return code


def test_workers_are_healthy_while_their_metrics_answer() -> None:
    """The workers' healthcheck, run as compose runs it (with the service's environment),
    against a real metrics server: healthy while it answers, unhealthy once it is gone."""
    from prometheus_client import CollectorRegistry, start_http_server  # noqa: PLC0415

    svc = services()
    codes = {healthcheck_code(svc[name]) for name in ("worker-1", "worker-2")}
    [code] = codes
    for name in ("worker-1", "worker-2"):
        assert svc[name]["healthcheck"]["start_period"]  # a worker takes a while to start
    server, thread = start_http_server(0, addr="127.0.0.1", registry=CollectorRegistry())
    port = str(server.server_address[1])
    env = {"PATH": os.environ["PATH"], "EVALSTREAM_METRICS_PORT": port}
    try:
        healthy = subprocess.run([sys.executable, "-c", code], env=env, timeout=30, check=False)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert healthy.returncode == 0
    unhealthy = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, timeout=30, check=False
    )
    assert unhealthy.returncode != 0


def test_the_gateway_is_healthy_when_ready() -> None:
    gateway = services()["gateway"]
    code = healthcheck_code(gateway)
    [url] = re.findall(r"'(http://[^']+)'", code)
    command = gateway["command"]
    assert url == f"http://127.0.0.1:{command[command.index('--port') + 1]}/readyz"
    app = (REPO / "evalstream/connectors/gateway/app.py").read_text()
    assert '"/readyz"' in app  # the gateway's readiness route: 503 until the broker answers


def test_kafka_keeps_its_data_in_a_named_volume() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    kafka = compose["services"]["kafka"]
    data_dir = kafka["environment"]["KAFKA_LOG_DIRS"]
    assert f"kafka-data:{data_dir}" in kafka["volumes"]
    assert "kafka-data" in compose["volumes"]
    assert kafka["environment"]["CLUSTER_ID"]  # the same cluster reuses the volume
