"""A real Prometheus server (Debian's package) on loopback, scraping targets we name."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.ports import free_port


class PrometheusServer:
    def __init__(self, workdir: Path, targets: list[str], flags: Sequence[str] = ()) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail(
                "prometheus is not installed: run scripts/system-deps.sh (apt package prometheus)"
            )
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: evalstream\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        self.log = (workdir / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                *flags,  # e.g. --enable-feature=exemplar-storage
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready(workdir)

    def _wait_ready(self, workdir: Path) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError((workdir / "prometheus.log").read_text()[-2000:])
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/-/ready", timeout=1
                ) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready within 30 s")

    def query(self, expr: str) -> list[dict[str, object]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": expr}
        )
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        result: list[dict[str, object]] = body["data"]["result"]
        return result

    def exemplars(self, expr: str, start: float, end: float) -> list[dict[str, object]]:
        """`/api/v1/query_exemplars`: per series, its labels and exemplars (needs the server
        started with `--enable-feature=exemplar-storage`)."""
        query = urllib.parse.urlencode({"query": expr, "start": start, "end": end})
        url = f"http://127.0.0.1:{self.port}/api/v1/query_exemplars?{query}"
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        result: list[dict[str, object]] = body["data"]
        return result

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        if not result:
            return None
        sample = result[0]["value"]
        assert isinstance(sample, list)
        return float(sample[1])

    def wait_for(
        self, expr: str, predicate: Callable[[float | None], bool], timeout: float = 30
    ) -> float | None:
        deadline = time.monotonic() + timeout
        value = self.value(expr)
        while not predicate(value) and time.monotonic() < deadline:
            time.sleep(0.5)
            value = self.value(expr)
        return value

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[list[str]], PrometheusServer]]:
    servers: list[PrometheusServer] = []

    def start(targets: list[str]) -> PrometheusServer:
        server = PrometheusServer(tmp_path, targets)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
