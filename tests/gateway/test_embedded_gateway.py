"""`evalstream up --gateway-port`: the quickstart posts signals to the embedded runtime."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.ports import free_port

EXE = Path(sys.executable).parent / "evalstream"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "code-review"


def test_up_serves_the_gateway_into_the_embedded_pipeline(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(EXE),
                "up",
                "--suite",
                str(EXAMPLE / "suite.yaml"),
                "--metrics-port",
                "0",
                "--gateway-port",
                str(port),
                "--grace-ms",
                "100",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        body = (EXAMPLE / "episodes.jsonl").read_bytes()
        response = httpx.post(
            f"{url}/v1/signals", content=body, headers={"content-type": "application/x-ndjson"}
        )
        assert response.status_code == 202, response.text
        assert response.json()["accepted"] == len(body.strip().splitlines())
        # Episodes close after their end signal and the grace period, and are printed live.
        while "cr-sql-injection-pass (sql-injection) passed" not in log.read_text():
            assert time.monotonic() < deadline + 30, log.read_text()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    text = log.read_text()
    assert "cr-sql-injection-fail-missed (sql-injection) failed" in text
