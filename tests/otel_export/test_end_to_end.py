"""An agent's trace, exported by the OpenTelemetry SDK into `evalstream up`'s gateway, is
evaluated, and the evaluation events reach an OTLP receiver under the evaluated spans."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.otel_export.agent_trace import serve_request, wait_ready, write_suite
from tests.otel_export.receiver import Received, otlp_receiver
from tests.support.ports import free_port

EXE = Path(sys.executable).parent / "evalstream"


@pytest.mark.parametrize("mode", ["logs", "spans"])
def test_an_sdk_trace_evaluated_by_up_comes_back_as_events_under_its_spans(
    tmp_path: Path, mode: str
) -> None:
    suite = write_suite(tmp_path)
    port = free_port()
    log = tmp_path / "up.log"
    with otlp_receiver() as receiver, log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(EXE),
                "up",
                "--suite",
                str(suite),
                "--metrics-port",
                "0",
                "--gateway-port",
                str(port),
                "--grace-ms",
                "100",
                "--otlp-endpoint",
                receiver.url,
                "--otlp-mode",
                mode,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(f"{url}/readyz", lambda: proc.poll() is None, log)
            provider = TracerProvider(resource=Resource.create({"service.name": "support-api"}))
            provider.add_span_processor(
                BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces"))
            )
            trace = serve_request(provider)
            assert provider.force_flush()
            provider.shutdown()
            receiver.wait_for(lambda items: len(items) >= 2)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
    by_type = {str(i.attributes["evalstream.assertion.type"]): i for i in receiver.items}
    assert set(by_type) == {"tool.called", "tool.notCalled"}, log.read_text()

    def parent(item: Received) -> tuple[str, str | None]:
        return item.trace_id, item.parent_span_id if mode == "spans" else item.span_id

    # decided when the tool was called: under the tool's span
    called = by_type["tool.called"]
    assert parent(called) == (trace.trace_id, trace.tool)
    assert called.attributes["gen_ai.evaluation.score.label"] == "pass"
    assert called.attributes["evalstream.early"] is True
    assert called.attributes["evalstream.agent_id"] == "support-bot"
    assert called.attributes["evalstream.episode_id"] == trace.trace_id
    # decided at close: under the trace's root span (the earliest of the one export)
    not_called = by_type["tool.notCalled"]
    assert parent(not_called) == (trace.trace_id, trace.root)
    assert not_called.attributes["evalstream.early"] is False
    if mode == "logs":
        assert {i.name for i in receiver.items} == {"gen_ai.evaluation.result"}
        assert {i.path for i in receiver.items} == {"/v1/logs"}
    else:
        assert {i.path for i in receiver.items} == {"/v1/traces"}
        assert all(i.span_id not in (trace.tool, trace.root) for i in receiver.items)
