"""The judge over the Message Batches API, against the local server's batch endpoints (real
SDK, real HTTP): answers mapped back to their questions by custom_id, errored and expired
requests as `error` verdicts naming the reason, usage priced at half, and a `check` killed
while its batch processes resuming that batch when run again (one batch created in all).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalstream.assertions.errors import InputError
from evalstream.assertions.judge.budget import JudgeBudgetExhaustedError
from evalstream.assertions.judge.protocol import JudgeRequest, JudgeVerdict
from evalstream.assertions.wire.pricing import Usage as PricingUsage
from evalstream.assertions.wire.pricing import default_pricing
from evalstream.connectors.anthropic_api.judge import AnthropicJudge, JudgeError, JudgeSettings
from evalstream.connectors.anthropic_api.judge_batch import BATCH_PRICE_FACTOR, BatchAnthropicJudge
from evalstream.connectors.targets.python_callable import CallableTarget
from evalstream.stream.evalruns.runner import RunSettings, run_dataset
from evalstream.stream.judge import judge_from, make_judge
from tests.evals import targets_for_tests
from tests.evals.conftest import make_suite
from tests.graders.judge_helpers import BAD, CRITERIA, GOOD, KEYWORDS, honest_judge, output_block
from tests.support.messages_api import BATCHES_PATH, MessagesAPIServer, MessagesRequest, Usage

MODEL = "claude-haiku-4-5"
EXE = Path(sys.executable).parent / "evalstream"


async def no_sleep(seconds: float) -> None:
    await asyncio.sleep(0)


def batch_judge(server: MessagesAPIServer, tmp_path: Path) -> BatchAnthropicJudge:
    settings = JudgeSettings.from_env(
        {},
        api_key="test-key",
        base_url=server.base_url,
        model=MODEL,
        batch=True,
        batch_state=str(tmp_path / "batch.json"),
    )
    return BatchAnthropicJudge(settings, sleep=no_sleep)


def request(output: str) -> JudgeRequest:
    return JudgeRequest(criteria=CRITERIA, output=output, min_score=0.7)


def ask_many(
    judge: BatchAnthropicJudge, *requests: JudgeRequest
) -> list[JudgeVerdict | BaseException]:
    return asyncio.run(judge.judge_many(list(requests)))


def test_answers_come_back_to_their_questions(tmp_path: Path) -> None:
    with MessagesAPIServer(handler=honest_judge(KEYWORDS), batch_polls=3) as server:
        judge = batch_judge(server, tmp_path)
        good, bad, good_again = ask_many(judge, request(GOOD), request(BAD), request(GOOD))
        creates = server.requests_to("POST", BATCHES_PATH)
        assert server.messages_requests == []  # nothing asked one by one
    assert len(creates) == 1
    assert len(creates[0].body["requests"]) == 2  # the repeated question is asked once
    assert isinstance(good, JudgeVerdict)
    assert isinstance(bad, JudgeVerdict)
    assert (good.score, bad.score) == (1.0, 0.0)
    assert isinstance(good_again, JudgeVerdict)
    assert good_again.score == 1.0
    assert (judge.stats.ok, judge.stats.cached) == (2, 1)
    assert not (tmp_path / "batch.json").exists()  # a finished batch leaves no state


def test_errored_and_expired_requests_are_errors_naming_the_reason(tmp_path: Path) -> None:
    def outcome(custom_id: str, params: MessagesRequest) -> str:
        text = output_block(params)
        return {GOOD: "succeeded", BAD: "errored"}.get(text, "expired")

    with MessagesAPIServer(handler=honest_judge(KEYWORDS), batch_outcome=outcome) as server:
        judge = batch_judge(server, tmp_path)
        good, errored, expired = ask_many(
            judge, request(GOOD), request(BAD), request("something else")
        )
    assert isinstance(good, JudgeVerdict)
    assert isinstance(errored, JudgeError)
    assert "batch request errored" in str(errored)
    assert "batch request rejected by the test server" in str(errored)
    assert isinstance(expired, JudgeError)
    assert "expired" in str(expired)
    assert (judge.stats.ok, judge.stats.errors) == (1, 2)


def test_batch_usage_is_priced_at_half(tmp_path: Path) -> None:
    usage = Usage(input_tokens=12_000, output_tokens=800)
    with MessagesAPIServer(handler=honest_judge(KEYWORDS, usage)) as server:
        batched = batch_judge(server, tmp_path)
        [in_batch] = ask_many(batched, request(GOOD))
        one_by_one = AnthropicJudge(
            JudgeSettings.from_env({}, api_key="k", base_url=server.base_url, model=MODEL)
        )
        single = asyncio.run(one_by_one.judge(request(BAD)))
    standard = default_pricing().cost(MODEL, PricingUsage(12_000, 800, 12_800))
    assert standard is not None
    assert standard > 0
    assert isinstance(in_batch, JudgeVerdict)
    assert in_batch.cost_usd == standard * BATCH_PRICE_FACTOR == batched.stats.cost_usd
    assert single.cost_usd == standard == 2 * batched.stats.cost_usd
    assert batched.stats.input_tokens == 12_000


def test_only_runs_that_end_take_the_batch_judge() -> None:
    env = {"ANTHROPIC_API_KEY": "k", "EVALSTREAM_JUDGE_BATCH": "1"}
    plain = {"ANTHROPIC_API_KEY": "k"}
    assert isinstance(make_judge(env=env, batchable=True), BatchAnthropicJudge)
    assert isinstance(make_judge(env=plain, batchable=True, batch=True), BatchAnthropicJudge)
    assert not isinstance(make_judge(env=plain, batchable=True), BatchAnthropicJudge)
    # the worker and `up` judge as episodes close: never a batch
    assert not isinstance(make_judge(env=env), BatchAnthropicJudge)


def _files(tmp_path: Path) -> tuple[Path, Path]:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: judged\ndefaultAssertions:\n  - type: llm.judge\n"
        f"    criteria: {json.dumps(list(CRITERIA))}\n    minScore: 0.7\n"
    )
    signals = tmp_path / "signals.jsonl"
    lines = []
    for episode, output in (("e1", GOOD), ("e2", BAD), ("e3", "expire me")):
        lines += [
            {"id": f"{episode}a", "episode_id": episode, "name": "harness:start",
             "timestamp": "2026-11-01T00:00:00Z", "payload": {}},
            {"id": f"{episode}b", "episode_id": episode, "name": "harness:end",
             "timestamp": "2026-11-01T00:00:01Z", "payload": {"output": output}},
        ]  # fmt: skip
    signals.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return suite, signals


def _wait_for(condition: object, what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def test_a_killed_check_resumes_its_batch(tmp_path: Path) -> None:
    suite, signals = _files(tmp_path)
    state = tmp_path / "state" / "batch.json"

    def outcome(custom_id: str, params: MessagesRequest) -> str:
        return "expired" if output_block(params) == "expire me" else "succeeded"

    with MessagesAPIServer(
        handler=honest_judge(KEYWORDS), batch_polls=1_000_000, batch_outcome=outcome
    ) as server:
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": "sk-ant-test-key",
            "ANTHROPIC_BASE_URL": server.base_url,
            "EVALSTREAM_JUDGE_BATCH_POLL_INITIAL_S": "0.05",
            "EVALSTREAM_JUDGE_BATCH_POLL_MAX_S": "0.05",
        }
        command = [
            str(EXE), "check", "--suite", str(suite), str(signals), "--format", "json",
            "--judge-batch", "--judge-batch-state", str(state),
        ]  # fmt: skip
        first = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            _wait_for(lambda: server.batches, "the batch's creation")
            [batch] = server.batches.values()
            _wait_for(lambda: batch.retrieves >= 1 and state.exists(), "a poll of the batch")
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        finally:
            if first.poll() is None:
                first.kill()
        assert json.loads(state.read_text())["batch_id"] == batch.id
        server.batch_polls = batch.retrieves + 1  # it ends after the next poll
        second = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        creates = server.requests_to("POST", BATCHES_PATH)
    assert len(creates) == 1, "the rerun created a second batch instead of resuming"
    assert server.messages_requests == []
    assert f"judge batch {batch.id}: resumed" in second.stderr
    assert "0 succeeded, 0 errored, 0 expired, 0 canceled, 3 processing" in second.stderr
    report = json.loads(second.stdout)
    verdicts = {
        e["episode_id"]: (e["assertions"][0]["verdict"], e["assertions"][0]["message"])
        for e in report["episodes"]
    }
    assert verdicts["e1"][0] == "pass"
    assert verdicts["e2"][0] == "fail"
    assert verdicts["e3"][0] == "error"
    assert "expired" in verdicts["e3"][1]
    assert report["judge"]["questions"] == {"ok": 2, "error": 1, "cached": 0,
                                            "budget_exhausted": 0}  # fmt: skip
    assert not state.exists()


def test_a_dataset_run_asks_all_its_questions_as_one_batch(tmp_path: Path) -> None:
    judged = [{"type": "llm.judge", "criteria": list(CRITERIA), "minScore": 0.7}]
    outputs = [GOOD, BAD, GOOD + " Again.", "Nothing useful.", BAD + " Sure."]
    suite = make_suite(
        [
            {"id": f"c{i}", "input": {"say": text}, "assertions": judged}
            for i, text in enumerate(outputs)
        ]
    )
    echo = CallableTarget("tests.evals.targets_for_tests:echo", targets_for_tests.echo)
    with MessagesAPIServer(handler=honest_judge(KEYWORDS), batch_polls=2) as server:
        judge = batch_judge(server, tmp_path)
        result = asyncio.run(
            run_dataset(suite, echo, RunSettings(concurrency=2, repeat=2), judge=judge)
        )
        [create] = server.requests_to("POST", BATCHES_PATH)
        assert server.messages_requests == []
    assert len(create.body["requests"]) == len(outputs)  # repeats are asked once
    statuses = [c.status for c in result.cases]
    assert statuses == ["passed", "failed", "passed", "failed", "failed"]
    assert judge.stats.ok == len(outputs)


def test_the_budget_holds_the_batch_and_settles_to_its_usage(tmp_path: Path) -> None:
    usage = Usage(input_tokens=2_000, output_tokens=100)
    with MessagesAPIServer(handler=honest_judge(KEYWORDS, usage)) as server:
        settings = batch_judge(server, tmp_path).settings
        tight = BatchAnthropicJudge(
            settings.model_copy(update={"budget_usd_per_hour": 0.0001}), sleep=no_sleep
        )
        refused = ask_many(tight, request(GOOD), request(BAD))
        assert server.requests_to("POST", BATCHES_PATH) == []
        roomy = BatchAnthropicJudge(
            settings.model_copy(update={"budget_usd_per_hour": 5.0}), sleep=no_sleep
        )
        answered = ask_many(roomy, request(GOOD), request(BAD))
    assert all(isinstance(r, JudgeBudgetExhaustedError) for r in refused)
    assert tight.stats.budget_exhausted == 2
    assert all(isinstance(r, JudgeVerdict) for r in answered)
    left = roomy.budget_remaining()["hour"]
    assert roomy.stats.cost_usd > 0
    assert abs(left - (5.0 - roomy.stats.cost_usd)) < 1e-9


def test_judge_batch_with_a_judge_factory_is_a_usage_error() -> None:
    with pytest.raises(InputError, match=r"--judge-batch .* does not apply to --judge"):
        judge_from("tests.graders.judge_helpers:honest_judge", batchable=True, batch=True)
