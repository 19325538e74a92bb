"""The judge's spend budget, prompt caching and overload handling, against a local server
speaking the Messages API (real SDK, real HTTP) and, for the ledger itself, with a given clock.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from evalstream.assertions.judge.budget import (
    BudgetLimits,
    JudgeBudgetExhaustedError,
    SpendBudget,
    input_token_bound,
)
from evalstream.assertions.judge.prompt import build_prompt
from evalstream.assertions.judge.protocol import JudgeExample, JudgeRequest, JudgeVerdict
from evalstream.assertions.reports.check_report import render_markdown
from evalstream.assertions.suite_format.suites import parse_suite
from evalstream.assertions.testing import SignalFactory
from evalstream.assertions.wire.pricing import (
    ModelPrice,
    PricingTable,
    Usage,
    default_pricing,
    load_pricing,
)
from evalstream.assertions.wire.signals import Signal
from evalstream.connectors.anthropic_api.judge import AnthropicJudge, JudgeError, JudgeSettings
from evalstream.stream.judge import make_judge
from evalstream.stream.offline import evaluate_signals
from evalstream.stream.telemetry.metrics import PipelineMetrics
from tests.graders.judge_helpers import CRITERIA, GOOD, KEYWORDS, criteria_of, verdict
from tests.support.messages_api import (
    ErrorReply,
    MessagesAPIServer,
    MessagesRequest,
    Reply,
)
from tests.support.messages_api import Usage as WireUsage

MODEL = "claude-haiku-4-5"
T0 = 1_800_000_000.0  # a fixed instant: the ledger is pure, the test gives the time


def settings(server: MessagesAPIServer, **overrides: object) -> JudgeSettings:
    return JudgeSettings.from_env(
        {}, api_key="test-key", base_url=server.base_url, model=MODEL, **overrides
    )


def request(output: str = GOOD, **kwargs: object) -> JudgeRequest:
    return JudgeRequest(criteria=CRITERIA, output=output, min_score=0.7, **kwargs)  # type: ignore[arg-type]


def ask(judge: AnthropicJudge, *requests: JudgeRequest) -> list[JudgeVerdict | BaseException]:
    async def run() -> list[JudgeVerdict | BaseException]:
        try:
            return list(
                await asyncio.gather(*(judge.judge(r) for r in requests), return_exceptions=True)
            )
        finally:
            await judge.aclose()

    return asyncio.run(run())


# --- the ledger ---------------------------------------------------------------------------


def test_reservations_count_until_settled_and_settle_to_the_real_cost() -> None:
    budget = SpendBudget(BudgetLimits(usd_per_hour=1.0))
    first = budget.reserve(0.6, 0, T0)
    with pytest.raises(JudgeBudgetExhaustedError, match=r"\$0\.6000 of \$1\.0000"):
        budget.reserve(0.6, 0, T0)  # 0.6 reserved + 0.6 > 1.0, though nothing is spent yet
    budget.settle(first, 0.1, 0, T0)
    assert budget.remaining_usd("hour", T0) == pytest.approx(0.9)
    budget.reserve(0.6, 0, T0)  # fits now that the first settled at 0.1
    assert budget.remaining_usd("hour", T0) == pytest.approx(0.3)
    assert budget.spent_usd("hour", T0) == pytest.approx(0.1)


def test_settling_twice_or_with_nothing_billed_releases_once() -> None:
    budget = SpendBudget(BudgetLimits(usd_per_day=1.0))
    held = budget.reserve(0.5, 0, T0)
    budget.settle(held, 0.0, 0, T0)
    budget.settle(held, 0.0, 0, T0)
    assert budget.remaining_usd("day", T0) == pytest.approx(1.0)


def test_spend_leaves_the_hour_but_stays_in_the_day() -> None:
    budget = SpendBudget(BudgetLimits(usd_per_hour=1.0, usd_per_day=1.5))
    budget.settle(budget.reserve(0.9, 0, T0), 0.9, 0, T0)
    with pytest.raises(JudgeBudgetExhaustedError, match="last hour"):
        budget.reserve(0.2, 0, T0 + 1_800)
    later = T0 + 3_600 + 60  # the bucket of T0 has left the hour
    budget.settle(budget.reserve(0.5, 0, later), 0.5, 0, later)
    with pytest.raises(JudgeBudgetExhaustedError, match="last day") as refused:
        budget.reserve(0.2, 0, later)
    assert "EVALSTREAM_JUDGE_BUDGET_USD_PER_DAY" in str(refused.value)
    assert budget.remaining_usd("hour", later) == pytest.approx(0.5)
    assert budget.remaining_usd("day", T0 + 86_400 + 60) == pytest.approx(1.0)


def test_window_totals_match_a_recount_over_two_days_of_spend() -> None:
    rng = random.Random(7)
    budget = SpendBudget(BudgetLimits(usd_per_hour=1e9, usd_per_day=1e9))
    spent: list[tuple[float, float]] = []
    now = T0
    for _ in range(1_500):
        now += rng.expovariate(1 / 120.0)  # a call every two minutes or so, for two days
        usd = rng.uniform(0.0, 0.01)
        budget.settle(budget.reserve(0.02, 0, now), usd, 1, now)
        spent.append((now, usd))
        for window, length in (("hour", 3_600.0), ("day", 86_400.0)):
            # a call counts while any part of its minute is inside the window
            recount = sum(u for t, u in spent if (t // 60) * 60 + 60 > now - length)
            assert budget.spent_usd(window, now) == pytest.approx(recount, abs=1e-9)
            exact = sum(u for t, u in spent if t > now - length)
            assert budget.spent_usd(window, now) >= exact - 1e-9  # never counts too little


def test_token_ceiling() -> None:
    budget = SpendBudget(BudgetLimits(tokens_per_hour=10_000))
    budget.settle(budget.reserve(0.0, 8_000, T0), 0.0, 7_000, T0)
    with pytest.raises(JudgeBudgetExhaustedError, match="7,000 of 10,000 tokens"):
        budget.reserve(0.0, 4_000, T0)
    budget.reserve(0.0, 3_000, T0)


def test_input_bound_is_at_least_the_byte_count() -> None:
    text = "naïve café " * 10
    assert input_token_bound(text) >= len(text.encode())


# --- pricing of cache tokens --------------------------------------------------------------


def test_cache_tokens_are_priced_and_the_saving_computed() -> None:
    price = default_pricing().price_of(MODEL)
    assert price is not None
    usage = Usage(input_tokens=100, output_tokens=50, cache_read_tokens=2_000)
    cost = default_pricing().cost(MODEL, usage)
    assert cost == pytest.approx(
        (100 * price.input + 50 * price.output + 2_000 * price.cache_read) / 1e6
    )
    saving = default_pricing().cache_saving(MODEL, usage)
    assert saving == pytest.approx(2_000 * (price.input - price.cache_read) / 1e6)
    writes = Usage(input_tokens=100, output_tokens=50, cache_write_tokens=2_000)
    assert default_pricing().cache_saving(MODEL, writes) < 0  # the write surcharge


def test_a_user_price_without_cache_rates_gets_the_multipliers(tmp_path: Path) -> None:
    path = tmp_path / "pricing.json"
    path.write_text('{"models": {"my-judge": {"input": 2.0, "output": 8.0}}}')
    price = load_pricing(path).price_of("my-judge")
    assert price == ModelPrice(input=2.0, output=8.0, cache_read=0.2, cache_write=2.5)


# --- the judge against the local server ---------------------------------------------------


class CostlyJudge:
    """An honest judge whose answers use the whole `max_tokens`: the dearest answer there is,
    so a budget that only checked spend before asking would be overrun by concurrent calls."""

    def __init__(self, pricing: PricingTable) -> None:
        self.pricing = pricing
        self.lock = threading.Lock()
        self.billed_usd = 0.0

    def __call__(self, req: MessagesRequest) -> Reply:
        text = req.last_user_text.lower()
        scores = {c: 5 if KEYWORDS[c] in text else 1 for c in criteria_of(req)}
        usage = WireUsage(
            input_tokens=len(req.all_text()) // 4, output_tokens=req.body["max_tokens"]
        )
        cost = self.pricing.cost(
            req.model, Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
        )
        with self.lock:
            self.billed_usd += cost or 0.0
        return Reply.text(verdict(scores), usage=usage, delay=0.05)


def test_budget_is_never_overrun_by_fifty_concurrent_questions(
    messages_api: MessagesAPIServer,
) -> None:
    ceiling = 0.05
    costly = CostlyJudge(default_pricing())
    messages_api.handler = costly
    registry = CollectorRegistry()
    metrics = PipelineMetrics(registry, process=False)
    judge = make_judge(
        metrics,
        env={},
        settings=settings(messages_api, max_concurrency=50, budget_usd_per_hour=ceiling),
    )
    assert judge is not None
    results = ask(judge, *(request(f"{GOOD} #{i}") for i in range(50)))

    answered = [r for r in results if isinstance(r, JudgeVerdict)]
    refused = [r for r in results if isinstance(r, JudgeBudgetExhaustedError)]
    assert len(answered) + len(refused) == 50
    assert answered
    assert refused
    assert costly.billed_usd <= ceiling  # what the API billed
    assert sum(r.cost_usd for r in answered) <= ceiling  # what the judge counted
    assert sum(r.cost_usd for r in answered) == pytest.approx(costly.billed_usd)
    assert len(messages_api.messages_requests) == len(answered)  # refused: never sent
    assert judge.stats.budget_exhausted == len(refused)
    sample = registry.get_sample_value
    assert sample("evalstream_judge_calls_total", {"outcome": "budget_exhausted"}) == len(refused)
    assert sample("evalstream_judge_calls_total", {"outcome": "ok"}) == len(answered)
    assert sample("evalstream_judge_spend_usd_total") == pytest.approx(costly.billed_usd)
    assert sample("evalstream_judge_budget_ceiling_usd", {"window": "hour"}) == ceiling
    remaining = sample("evalstream_judge_budget_remaining_usd", {"window": "hour"})
    assert remaining == pytest.approx(ceiling - costly.billed_usd)


def _episode(output: str, episode_id: str) -> list[Signal]:
    f = SignalFactory(episode_id=episode_id)
    return [f("harness:start"), f("harness:end", {"output": output, "durationMs": 5})]


def test_budget_exhausted_verdicts_are_errors_that_say_so(messages_api: MessagesAPIServer) -> None:
    suite = parse_suite(
        {
            "name": "review",
            "defaultAssertions": [
                {"type": "llm.judge", "criteria": list(CRITERIA), "minScore": 0.7, "model": MODEL}
            ],
        },
        "suite.yaml",
    )
    messages_api.handler = CostlyJudge(default_pricing())
    # room for about one question's worst case: the first is asked, the rest refused
    judge = AnthropicJudge(settings(messages_api, max_concurrency=1, budget_usd_per_day=0.010))
    signals = [s for i in range(4) for s in _episode(f"{GOOD} #{i}", f"e{i}")]
    report = evaluate_signals(signals, [suite], judge=judge)
    outcomes = [r.assertions[0] for r in report.results]
    assert [str(o.verdict) for o in outcomes].count("pass") == 1
    refused = [o for o in outcomes if o.verdict != "pass"]
    assert len(refused) == 3
    for outcome in refused:
        assert outcome.verdict == "error"
        assert "judge budget spent" in outcome.message
        assert "EVALSTREAM_JUDGE_BUDGET_USD_PER_DAY" in outcome.message


def test_cached_answers_are_served_when_the_budget_is_spent(
    messages_api: MessagesAPIServer,
) -> None:
    messages_api.handler = CostlyJudge(default_pricing())
    judge = AnthropicJudge(settings(messages_api, budget_usd_per_hour=0.010))
    [first] = ask(judge, request())
    [again, other] = ask(judge, request(), request("something else"))
    assert isinstance(first, JudgeVerdict)
    assert isinstance(again, JudgeVerdict)
    assert again.cost_usd == 0.0
    assert isinstance(other, JudgeBudgetExhaustedError)


def test_a_usd_budget_needs_a_priced_model(messages_api: MessagesAPIServer) -> None:
    judge = AnthropicJudge(settings(messages_api, budget_usd_per_hour=1.0))
    [result] = ask(judge, request(model="someone-elses-model"))
    assert isinstance(result, JudgeError)
    assert "has no price" in str(result)
    assert messages_api.messages_requests == []


def test_budget_settings_from_the_environment() -> None:
    env = {
        "EVALSTREAM_JUDGE_BUDGET_USD_PER_HOUR": "2.5",
        "EVALSTREAM_JUDGE_BUDGET_USD_PER_DAY": "20",
        "EVALSTREAM_JUDGE_BUDGET_TOKENS_PER_DAY": "5000000",
    }
    limits = JudgeSettings.from_env(env).budget_limits()
    assert limits == BudgetLimits(
        usd_per_hour=2.5, usd_per_day=20.0, tokens_per_hour=None, tokens_per_day=5_000_000
    )
    with pytest.raises(ValueError, match="budget_usd_per_hour"):
        JudgeSettings.from_env({"EVALSTREAM_JUDGE_BUDGET_USD_PER_HOUR": "-1"})


# --- prompt caching -----------------------------------------------------------------------


class Observed:
    def __init__(self) -> None:
        self.cache: list[tuple[int, int, float]] = []
        self.budget: list[Mapping[str, float]] = []

    def judge_call(self, outcome: str, cost_usd: float, latency_s: float) -> None:
        pass

    def judge_cache(self, read_tokens: int, write_tokens: int, saving_usd: float) -> None:
        self.cache.append((read_tokens, write_tokens, saving_usd))

    def judge_budget(self, remaining_usd: Mapping[str, float]) -> None:
        self.budget.append(dict(remaining_usd))


def _honest(req: MessagesRequest) -> Reply:
    text = req.last_user_text.lower()
    return Reply.text(verdict({c: 5 if KEYWORDS[c] in text else 1 for c in criteria_of(req)}))


def test_the_stable_prefix_is_marked_for_the_prompt_cache() -> None:
    with MessagesAPIServer(handler=_honest) as server:
        rubric = "Reviewers must name the vulnerability."
        examples = (JudgeExample("Use prepared statements.", 4, "names the fix only"),)
        ask(
            AnthropicJudge(settings(server)),
            request(rubric=rubric, examples=examples),
            request("another output", rubric=rubric, examples=examples),
        )
        first, second = (r.body for r in server.messages_requests)
        [block] = first["system"]
        assert block["cache_control"] == {"type": "ephemeral"}
        assert rubric in block["text"]
        assert "Use prepared statements." in block["text"]
        assert first["system"] == second["system"]  # byte-identical prefix: a cache hit
        assert first["messages"] != second["messages"]  # only the output varies
        assert GOOD not in block["text"]

        ask(AnthropicJudge(settings(server, prompt_cache=False)), request("third"))
        assert isinstance(server.messages_requests[-1].body["system"], str)


def test_cache_reads_are_priced_counted_and_reported() -> None:
    with MessagesAPIServer(handler=_honest, prompt_cache=True) as server:
        registry = CollectorRegistry()
        metrics = PipelineMetrics(registry, process=False)
        judge = make_judge(metrics, env={}, settings=settings(server, max_concurrency=1))
        assert judge is not None
        observed_judge = AnthropicJudge(judge.settings, observer=Observed())
        results = ask(judge, *(request(f"{GOOD} #{i}") for i in range(3)))
        assert all(isinstance(r, JudgeVerdict) for r in results)

        stats = judge.stats
        assert stats.cache_write_tokens > 0  # the first question wrote the prefix
        assert stats.cache_read_tokens == 2 * stats.cache_write_tokens  # the others read it
        price = default_pricing().price_of(MODEL)
        assert price is not None
        expected_cost = (
            stats.input_tokens * price.input
            + stats.output_tokens * price.output
            + stats.cache_read_tokens * price.cache_read
            + stats.cache_write_tokens * price.cache_write
        ) / 1e6
        assert stats.cost_usd == pytest.approx(expected_cost)
        expected_saving = (
            stats.cache_read_tokens * (price.input - price.cache_read)
            - stats.cache_write_tokens * (price.cache_write - price.input)
        ) / 1e6
        assert stats.cache_saving_usd == pytest.approx(expected_saving)
        assert stats.cache_saving_usd > 0

        sample = registry.get_sample_value
        assert sample("evalstream_judge_cache_tokens_total", {"kind": "read"}) == (
            stats.cache_read_tokens
        )
        assert sample("evalstream_judge_cache_tokens_total", {"kind": "write"}) == (
            stats.cache_write_tokens
        )
        assert sample("evalstream_judge_spend_usd_total") == pytest.approx(expected_cost)
        summary = stats.summary()
        assert f"{stats.cache_read_tokens:,} read" in summary
        assert f"saved ${stats.cache_saving_usd:.4f}" in summary

        # the observer protocol carries the same numbers
        [first, *rest] = ask(observed_judge, request("fresh output"))
        assert isinstance(first, JudgeVerdict)
        assert not rest
        observer = observed_judge.observer
        assert isinstance(observer, Observed)
        [(read, write, saving)] = observer.cache
        assert (read, write) == (stats.cache_write_tokens, 0)
        assert saving > 0


# --- overload answers ---------------------------------------------------------------------


def test_waiting_out_a_429_does_not_hold_the_concurrency_slot(
    messages_api: MessagesAPIServer,
) -> None:
    """With one slot, the second question is answered while the first waits out its
    `retry-after`: the wait ends only once the second question has its verdict."""
    messages_api.enqueue(ErrorReply(429, "slow down", retry_after=7))
    messages_api.handler = _honest
    waits: list[float] = []
    second_done = asyncio.Event()

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await second_done.wait()

    judge = AnthropicJudge(settings(messages_api, max_concurrency=1), sleep=sleep)

    async def run() -> list[JudgeVerdict]:
        async def second() -> JudgeVerdict:
            await asyncio.sleep(0)  # the first question is sent first
            verdict = await judge.judge(request("second"))
            second_done.set()
            return verdict

        try:
            return list(
                await asyncio.wait_for(asyncio.gather(judge.judge(request()), second()), 30)
            )
        finally:
            await judge.aclose()

    first, second = asyncio.run(run())
    assert waits == [7.0]  # retry-after honoured
    assert first.score == 1.0
    assert second.score == 0.0
    bodies = [r.body["messages"][0]["content"] for r in messages_api.messages_requests]
    assert len(bodies) == 3
    assert bodies[0] == bodies[2] != bodies[1]  # first, second, first again


def test_a_reservation_is_held_across_retries_and_released_on_failure(
    messages_api: MessagesAPIServer,
) -> None:
    messages_api.handler = lambda req: ErrorReply(529, "Overloaded")
    observed = Observed()

    async def no_wait(seconds: float) -> None:
        assert judge.budget is not None
        observed.budget.append({"during": judge.budget.remaining_usd("hour", 0.0) or 0.0})

    judge = AnthropicJudge(
        settings(messages_api, max_retries=2, budget_usd_per_hour=1.0),
        observer=observed,
        sleep=no_wait,
        wall_clock=lambda: 0.0,
    )
    [result] = ask(judge, request())
    assert isinstance(result, JudgeError)
    assert "HTTP 529" in str(result)
    during = [b["during"] for b in observed.budget if "during" in b]
    assert len(during) == 2
    assert all(left < 1.0 for left in during)
    assert judge.budget_remaining() == {"hour": 1.0}  # nothing billed: released
    assert observed.budget[-1] == {"hour": 1.0}


def test_the_run_report_carries_the_judge_spend_and_cache_saving() -> None:
    suite = parse_suite(
        {
            "name": "review",
            "defaultAssertions": [
                {"type": "llm.judge", "criteria": list(CRITERIA), "minScore": 0.7, "model": MODEL}
            ],
        },
        "suite.yaml",
    )
    with MessagesAPIServer(handler=_honest, prompt_cache=True) as server:
        judge = AnthropicJudge(settings(server, max_concurrency=1))
        signals = [s for i in range(3) for s in _episode(f"{GOOD} #{i}", f"e{i}")]
        report = evaluate_signals(signals, [suite], judge=judge)
    usage = report.judge
    assert usage is not None
    assert usage is not judge.stats  # a copy: later questions do not change this run's report
    assert usage.ok == 3
    assert usage.cache_read_tokens > 0
    as_json = report.to_json()["judge"]
    assert as_json["tokens"]["cache_read"] == usage.cache_read_tokens
    assert as_json["cost_usd"] == pytest.approx(usage.cost_usd)
    assert as_json["cache_saving_usd"] > 0
    markdown = render_markdown(report)
    assert "prompt cache:" in markdown
    assert f"${usage.cost_usd:.4f}" in markdown

    without_judge = evaluate_signals(signals, [suite], judge=None)
    assert without_judge.judge is None
    assert "judge" not in without_judge.to_json()


def test_the_budget_alerts_read_metrics_the_judge_exports() -> None:
    rules = Path(__file__).resolve().parents[2] / "deploy/prometheus/rules/operations.yml"
    exprs = [
        rule["expr"]
        for group in yaml.safe_load(rules.read_text())["groups"]
        for rule in group["rules"]
        if rule["alert"].startswith("EvalstreamJudgeBudget")
    ]
    assert len(exprs) == 2
    used = {name for expr in exprs for name in re.findall(r"\bevalstream_[a-z_]+", expr)}
    registry = CollectorRegistry()
    env = {
        "ANTHROPIC_API_KEY": "k",
        "EVALSTREAM_JUDGE_BUDGET_USD_PER_HOUR": "1",
        "EVALSTREAM_JUDGE_BUDGET_USD_PER_DAY": "5",
    }
    judge = make_judge(PipelineMetrics(registry, process=False), env=env)
    assert judge is not None
    exported = {s.name for family in registry.collect() for s in family.samples}
    assert used <= exported, used - exported


def test_a_timed_out_request_stays_counted_at_its_worst_case(
    messages_api: MessagesAPIServer,
) -> None:
    """The API may have billed a request whose answer never came; its retry must fit again."""
    messages_api.enqueue(Reply.text("late", delay=30.0))  # the server stops waiting at teardown
    messages_api.handler = _honest
    judge = AnthropicJudge(
        settings(messages_api, timeout_s=1.0, max_retries=1, budget_usd_per_hour=1.0),
        sleep=Recorder(),
    )
    [result] = ask(judge, request())
    assert isinstance(result, JudgeVerdict)  # the retry was answered
    assert len(messages_api.messages_requests) == 2
    assert judge.budget is not None
    spent = judge.budget.spent_usd("hour", time.time())
    assert spent == pytest.approx(result.cost_usd + worst_case(request()), rel=1e-6)


def worst_case(req: JudgeRequest) -> float:
    prompt = build_prompt(req)
    bound = input_token_bound(prompt.system, prompt.user, json.dumps(prompt.schema))
    cost = default_pricing().worst_case_cost(MODEL, bound, 1024)
    assert cost is not None
    return cost


class Recorder:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
