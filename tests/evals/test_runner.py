"""The dataset runner: evaluation through the engine, timeouts, cancellation, concurrency,
retries, fail-fast, selection, judges and the three kinds of target."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evalstream.assertions.errors import InputError
from evalstream.assertions.judge.protocol import JudgeRequest, JudgeVerdict
from evalstream.assertions.suite_format.suites import Suite
from evalstream.connectors.targets.python_callable import CallableTarget
from evalstream.connectors.targets.spec import parse_target
from evalstream.stream.evalruns.runner import DatasetRunner, RunSettings, run_dataset
from tests.evals import targets_for_tests as t
from tests.evals.conftest import AGENT, HASTY, make_suite


@pytest.fixture(autouse=True)
def _reset() -> None:
    t.EVENTS.clear()
    t.ATTEMPTS.clear()


def target(name: str) -> CallableTarget:
    return CallableTarget(f"tests.evals.targets_for_tests:{name}", getattr(t, name))


def run(suite: Suite, tgt: Any, **settings: Any) -> Any:
    kwargs = {k: settings.pop(k) for k in ("judge", "config") if k in settings}
    return asyncio.run(run_dataset(suite, tgt, RunSettings(**settings), **kwargs))


SAY = [{"type": "output.contains", "text": "hello"}]


def test_example_dataset_runs_through_the_engine(example_suite: Suite) -> None:
    good = run(example_suite, parse_target(AGENT))
    assert (good.passed_cases, good.failed_cases, good.skipped_cases) == (10, 0, 1)
    assert good.case("voice-channel").skip_reason == "skip: true in the dataset"
    bad = run(example_suite, parse_target(AGENT), config=HASTY)
    failed = {c.case_id for c in bad.cases if c.status == "failed"}
    assert failed == {"refund-small", "refund-large-escalates", "refund-already-refunded"}
    sample = bad.case("refund-small").samples[0]
    [broken] = sample.failed_assertions()
    assert broken.type == "tool.sequence"
    assert "lookup_order" in broken.message
    # Every sample's signals are kept, in episode order, with the run's attributes.
    names = [s["name"] for s in sample.signals]
    assert names[0] == "harness:start"
    assert names[-1] == "harness:end"
    assert sample.signals[0]["attrs"]["case_id"] == "refund-small"
    assert bad.aggregate_metrics.total_cost > good.aggregate_metrics.total_cost


def test_defaults_apply_and_output_comes_from_the_return_value() -> None:
    suite = make_suite(
        [
            {"id": "a", "input": {"say": "hello"}, "assertions": SAY},
            {"id": "b", "input": {"say": "bye"}, "assertions": SAY},
        ],
        defaultAssertions=[{"type": "signal.contains", "pattern": "harness:end"}],
    )
    result = run(suite, target("echo"))
    assert [c.status for c in result.cases] == ["passed", "failed"]
    assert [len(c.samples[0].assertions) for c in result.cases] == [2, 2]
    assert result.cases[0].samples[0].output == "hello"


def test_returned_signals_are_evaluated() -> None:
    suite = make_suite(
        [
            {
                "id": "a",
                "input": {"say": "hi"},
                "assertions": [
                    {"type": "agent.activated", "agentId": "solo"},
                    {"type": "tool.called", "name": "Read"},
                    {"type": "output.contains", "text": "hi"},
                ],
            }
        ]
    )
    assert run(suite, target("returns_signals")).passed_cases == 1


def test_timeout_cancels_an_async_target_and_keeps_what_it_emitted() -> None:
    suite = make_suite(
        [
            {
                "id": "slow",
                "timeout": 100,
                "input": {"name": "slow", "sleep": 30},
                "assertions": SAY,
            },
            {"id": "fast", "input": {"name": "fast", "sleep": 0}, "assertions": SAY},
        ]
    )
    result = run(suite, target("slow_async"), concurrency=2)
    slow = result.case("slow")
    assert slow.status == "error"
    assert slow.samples[0].error_kind == "timeout"
    assert "timed out after 100 ms" in (slow.samples[0].error or "")
    assert [s["name"] for s in slow.samples[0].signals] == ["work:started"]
    assert "cancelled slow" in t.EVENTS
    assert "done slow" not in t.EVENTS
    # Errored cases are errors, not passes, and add nothing to the latency figures.
    assert result.error_cases == 1
    assert result.aggregate_metrics.completed_samples == 1


def test_timeout_stops_a_sync_target_at_its_next_recorder_call() -> None:
    suite = make_suite(
        [
            {
                "id": "s",
                "timeout": 100,
                "input": {"name": "s", "steps": 1000, "step_s": 0.01},
                "assertions": SAY,
            }
        ]
    )
    result = run(suite, target("slow_sync"))
    assert result.case("s").samples[0].error_kind == "timeout"
    assert "stopped s by CaseCancelled" in t.EVENTS
    assert result.case("s").samples[0].notes == []  # it stopped: nothing left running


def test_timeout_kills_a_subprocess_target(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = tmp_path / "agent.py"
    script.write_text(
        "import os, sys, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        'print(\'{"name": "agent:activated", "payload": {"agent": "x"}}\', flush=True)\n'
        "time.sleep(60)\n"
    )
    suite = make_suite([{"id": "s", "timeout": 3000, "input": {}, "assertions": SAY}])
    result = run(suite, parse_target(f"cmd:{sys.executable} {script}"))
    sample = result.case("s").samples[0]
    assert sample.error_kind == "timeout"
    assert [s["name"] for s in sample.signals] == ["agent:activated"]
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the process was killed and reaped


def test_subprocess_target_runs_the_example_agent(example_suite: Suite) -> None:
    agent = Path(AGENT.rpartition(":")[0])
    result = run(
        example_suite,
        parse_target(f"cmd:{sys.executable} {agent}"),
        case_ids=("refund-small", "shipping-status"),
    )
    assert [c.status for c in result.cases if not c.skipped] == ["passed", "passed"]


def test_subprocess_exit_status_is_a_target_error(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text("import sys\nsys.stderr.write('boom: no model\\n')\nsys.exit(3)\n")
    suite = make_suite([{"id": "s", "input": {}, "assertions": SAY}])
    sample = run(suite, parse_target(f"cmd:{sys.executable} {script}")).cases[0].samples[0]
    assert sample.error_kind == "target"
    assert "exited with status 3" in (sample.error or "")
    assert "boom: no model" in (sample.error or "")


def test_results_keep_case_order_under_concurrency() -> None:
    sleeps = [0.3, 0.0, 0.2, 0.0, 0.1, 0.0]
    suite = make_suite(
        [
            {"id": f"c{i}", "input": {"name": f"c{i}", "sleep": s}, "assertions": SAY}
            for i, s in enumerate(sleeps)
        ]
    )
    result = run(suite, target("slow_async"), concurrency=3)
    assert [c.case_id for c in result.cases] == [f"c{i}" for i in range(6)]
    assert all(c.samples[0].output == f"finished c{i}" for i, c in enumerate(result.cases))
    # At most three ran at once: the fourth start comes after the first finish.
    starts_before_first_done = t.EVENTS.index(next(e for e in t.EVENTS if e.startswith("done")))
    assert starts_before_first_done <= 3


def test_retries_follow_errors_not_failures() -> None:
    suite = make_suite(
        [
            {"id": "recovers", "input": {"fail_times": 2, "say": "hello"}, "assertions": SAY},
            {"id": "fails", "input": {"say": "nope"}, "assertions": SAY},
            {"id": "gives-up", "input": {"fail_times": 5, "say": "hello"}, "assertions": SAY},
        ]
    )
    result = run(suite, target("flaky"), retries=2, retry_backoff_s=0.0)
    recovers, fails, gives_up = result.cases
    assert (recovers.status, recovers.samples[0].attempts) == ("passed", 3)
    assert (fails.status, fails.samples[0].attempts) == ("failed", 1)
    assert (gives_up.status, gives_up.samples[0].attempts) == ("error", 3)
    assert "ConnectionError: upstream unavailable (attempt 3)" in (gives_up.samples[0].error or "")


def test_fail_fast_stops_and_marks_the_rest_skipped() -> None:
    suite = make_suite(
        [
            {
                "id": "bad",
                "input": {"name": "bad", "sleep": 0},
                "assertions": [{"type": "output.contains", "text": "never"}],
            },
            *(
                {"id": f"later{i}", "input": {"name": f"l{i}", "sleep": 0.05}, "assertions": SAY}
                for i in range(4)
            ),
        ]
    )
    result = run(suite, target("slow_async"), concurrency=1, fail_fast=True)
    assert result.case("bad").status == "failed"
    assert result.stopped_early
    assert "fail-fast" in result.stopped_early
    assert all(c.status == "skipped" for c in result.cases[1:])
    assert "fail-fast" in (result.cases[1].skip_reason or "")


def test_interrupt_keeps_the_finished_cases() -> None:
    suite = make_suite(
        [
            {
                "id": f"c{i}",
                "input": {"name": f"c{i}", "sleep": 0 if i < 2 else 30},
                "assertions": [{"type": "output.contains", "text": "finished"}],
            }
            for i in range(4)
        ]
    )

    async def main() -> Any:
        runner = DatasetRunner(suite, target("slow_async"), RunSettings(concurrency=4))
        task = asyncio.create_task(runner.run())
        while sum(e.startswith("done") for e in t.EVENTS) < 2:
            await asyncio.sleep(0.01)
        runner.interrupt()
        return await task

    result = asyncio.run(main())
    assert result.interrupted
    assert [c.status for c in result.cases] == ["passed", "passed", "skipped", "skipped"]
    assert result.cases[2].skip_reason == "interrupted"
    assert {"cancelled c2", "cancelled c3"} <= set(t.EVENTS)


def test_selection_skip_only_tags_and_ids() -> None:
    cases: list[dict[str, Any]] = [
        {"id": "a", "tags": ["smoke"], "input": {"say": "hello"}, "assertions": SAY},
        {"id": "b", "tags": ["slow"], "input": {"say": "hello"}, "assertions": SAY},
        {"id": "c", "skip": True, "input": {"say": "hello"}, "assertions": SAY},
    ]
    result = run(make_suite(cases), target("echo"), tags=("smoke",))
    assert [c.status for c in result.cases] == ["passed", "skipped", "skipped"]
    result = run(make_suite(cases), target("echo"), case_ids=("b",))
    assert [c.status for c in result.cases] == ["skipped", "passed", "skipped"]
    only = [dict(cases[0]), {**cases[1], "only": True}, cases[2]]
    result = run(make_suite(only), target("echo"))
    assert [c.status for c in result.cases] == ["skipped", "passed", "skipped"]
    with pytest.raises(InputError, match=r"unknown case id.*'zz'.*valid ids: a, b, c"):
        run(make_suite(cases), target("echo"), case_ids=("zz",))


def test_repeats_give_pass_at_k_and_both_pass_hat_k() -> None:
    suite = make_suite([{"id": "a", "input": {"say": "hello"}, "assertions": SAY}])
    result = run(suite, target("echo"), repeat=4, k=3)
    pm = result.pass_metrics
    assert result.cases[0].n == 4
    assert (pm.pass_at_1, pm.pass_at_k, pm.pass_hat_k_seed, pm.pass_hat_k_unbiased) == (1, 1, 1, 1)
    short = run(suite, target("echo"), repeat=2, k=3).pass_metrics
    assert short.pass_at_k is None
    assert short.pass_hat_k_unbiased is None
    assert short.pass_hat_k_seed == 1.0
    assert short.undefined_reason
    assert "fewer than k=3 samples" in short.undefined_reason


class ScriptedJudge:
    """A deterministic judge (the Judge protocol): scores by a keyword in the output."""

    def __init__(self) -> None:
        self.requests: list[JudgeRequest] = []

    async def judge(self, request: JudgeRequest) -> JudgeVerdict:
        self.requests.append(request)
        return JudgeVerdict(score=0.9 if "polite" in request.output else 0.2, reasoning="kw")


def test_llm_judge_uses_the_injected_judge_and_errors_without_one() -> None:
    judged = [{"type": "llm.judge", "criteria": ["is polite"], "minScore": 0.7}]
    suite = make_suite(
        [
            {"id": "nice", "input": {"say": "a polite answer"}, "assertions": judged},
            {"id": "rude", "input": {"say": "go away"}, "assertions": judged},
        ]
    )
    judge = ScriptedJudge()
    result = run(suite, target("echo"), judge=judge)
    assert [c.status for c in result.cases] == ["passed", "failed"]
    assert sorted(r.output for r in judge.requests) == ["a polite answer", "go away"]
    no_judge = run(suite, target("echo"))
    assert [c.status for c in no_judge.cases] == ["error", "error"]
    assert no_judge.cases[0].samples[0].error_kind == "evaluation"
    assert no_judge.pass_rate == 0.0


def test_a_raising_target_is_an_error_sample() -> None:
    suite = make_suite([{"id": "a", "input": {}, "assertions": SAY}])
    sample = run(suite, target("raises")).cases[0].samples[0]
    assert (sample.status, sample.error_kind) == ("error", "target")
    assert sample.error == "ValueError: the agent crashed"


class _SignalsHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["input"].get("fail"):
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"overloaded")
            return
        doc = {
            "signals": [
                {"name": "agent:activated", "payload": {"agent": "remote"}, "timestamp": 5}
            ],
            "output": f"hello {body['caseId']}",
        }
        data = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def signals_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SignalsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/run"
    server.shutdown()
    server.server_close()


def test_http_target(signals_server: str) -> None:
    suite = make_suite(
        [
            {
                "id": "ok",
                "input": {},
                "assertions": [*SAY, {"type": "agent.activated", "agentId": "remote"}],
            },
            {"id": "down", "input": {"fail": True}, "assertions": SAY},
        ]
    )
    result = run(suite, parse_target(signals_server))
    assert result.case("ok").status == "passed"
    assert result.case("ok").samples[0].output == "hello ok"
    down = result.case("down").samples[0]
    assert down.error_kind == "target"
    assert "answered 503: overloaded" in (down.error or "")


def test_saved_signals_give_the_same_verdicts_under_check(example_suite: Suite) -> None:
    """One engine: re-evaluating a run's saved signals with `check` gives the same verdicts."""
    from evalstream.assertions.wire.signals import signal_from_obj  # noqa: PLC0415
    from evalstream.stream.offline import evaluate_signals  # noqa: PLC0415

    result = run(example_suite, parse_target(AGENT), config=HASTY, repeat=2)
    signals = [signal_from_obj(sig) for c in result.cases for s in c.samples for sig in s.signals]
    report = evaluate_signals(signals, [example_suite])
    by_episode = {r.episode_id: r.status for r in report.results}
    ran = {s.episode_id: s.status for c in result.cases for s in c.samples}
    assert by_episode == ran
    assert sorted(ran.values()).count("failed") == 6


def test_a_sync_target_that_ignores_cancellation_is_reported_not_waited_for() -> None:
    suite = make_suite([{"id": "stuck", "timeout": 100, "input": {}, "assertions": SAY}])
    t.RELEASE.clear()
    try:
        stuck = CallableTarget("stuck", t.stuck_sync)
        result = run(suite, stuck)
        [note] = result.case("stuck").samples[0].notes
        assert "keeps running in its thread" in note
        assert result.case("stuck").samples[0].error_kind == "timeout"
        assert "stuck released" not in t.EVENTS  # the run returned without waiting for it
    finally:
        t.RELEASE.set()
