#!/usr/bin/env python3
"""What the LLM judge's own code costs per question, the API call excluded, with and without
a spend budget.

    .venv/bin/python bench/judge_bench.py [--questions 400] [--rounds 5]

Asks `AnthropicJudge` `--questions` distinct questions (no response-cache hits), one at a
time, against the local Messages API server the tests use (tests/support/messages_api.py,
prompt-cache simulation on, so usage carries cache reads), run in a child process so its
threads do not compete with the judge for this one's interpreter lock. The SDK call
(`client.messages.create`: request building, HTTP to 127.0.0.1, the server, response parsing)
is timed on its own and subtracted, so what is left is the judge path: validating the
request, the response-cache key, building the prompt, the budget's reserve and settle,
pricing the usage, parsing the verdict, the bookkeeping and the observer (Prometheus
metrics). Rounds alternate the two configurations so load on the machine hits both alike.
Also the process CPU time per question (judge path and SDK, the server excluded).

Also times `SpendBudget.reserve` + `settle` alone with a full day of minute buckets.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import anthropic  # noqa: E402 - after the path setup
from prometheus_client import CollectorRegistry  # noqa: E402

from evalstream.assertions.judge.budget import BudgetLimits, SpendBudget  # noqa: E402
from evalstream.assertions.judge.protocol import JudgeExample, JudgeRequest  # noqa: E402
from evalstream.connectors.anthropic_api.judge import AnthropicJudge, JudgeSettings, default_client  # noqa: E402
from evalstream.stream.judge import PrometheusJudgeObserver  # noqa: E402
from evalstream.stream.telemetry.metrics import PipelineMetrics  # noqa: E402
from tests.graders.judge_helpers import CRITERIA, GOOD, KEYWORDS, verdict  # noqa: E402
from tests.support.messages_api import MessagesAPIServer, MessagesRequest, Reply  # noqa: E402

MODEL = "claude-haiku-4-5"
RUBRIC = (
    "Reviewers must name the vulnerability and the fix. A review that only restates the code "
    "or praises it scores low on both criteria."
)
EXAMPLES = (
    JudgeExample("Use prepared statements.", 3, "names the fix, not the vulnerability"),
    JudgeExample("This concatenation is open to SQL injection.", 3, "names the flaw only"),
)


def answer(req: MessagesRequest) -> Reply:
    text = req.last_user_text.lower()
    return Reply.text(verdict({c: 5 if KEYWORDS[c] in text else 1 for c in CRITERIA}))


class TimedCalls:
    """Wraps each client's `messages.create` to add up the time spent in the API call."""

    def __init__(self, sdk_tls: bool) -> None:
        self.seconds = 0.0
        self.sdk_tls = sdk_tls

    def factory(self, settings: JudgeSettings) -> anthropic.AsyncAnthropic:
        if self.sdk_tls:  # the SDK's own HTTP client: a TLS context built per client
            client = anthropic.AsyncAnthropic(
                api_key="bench", base_url=settings.base_url, max_retries=0, timeout=30
            )
        else:
            client = default_client(settings)
        create = client.messages.create

        async def timed(**params: Any) -> Any:
            started = time.perf_counter()
            try:
                return await create(**params)
            finally:
                self.seconds += time.perf_counter() - started

        client.messages.create = timed  # type: ignore[method-assign]
        return client


def serve() -> None:
    """The child process: a local Messages API server until stdin closes."""
    with MessagesAPIServer(handler=answer, prompt_cache=True) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


def one_round(
    base_url: str, questions: int, budget: bool, tag: str, sdk_tls: bool
) -> tuple[float, float]:
    """µs of judge path per question (wall time minus the time inside the API call), and µs
    of this process's CPU per question."""
    overrides: dict[str, Any] = {}
    if budget:
        overrides = {
            "budget_usd_per_hour": 1e6,
            "budget_usd_per_day": 1e7,
            "budget_tokens_per_day": 10**12,
        }
    settings = JudgeSettings.from_env(
        {}, api_key="bench", base_url=base_url, model=MODEL, **overrides
    )
    timed = TimedCalls(sdk_tls)
    metrics = PipelineMetrics(CollectorRegistry(), process=False)
    judge = AnthropicJudge(
        settings,
        observer=PrometheusJudgeObserver(metrics, settings),
        client_factory=timed.factory,
    )
    requests = [
        JudgeRequest(
            criteria=CRITERIA,
            output=f"{GOOD} ({tag} #{i})",
            min_score=0.7,
            rubric=RUBRIC,
            examples=EXAMPLES,
        )
        for i in range(questions)
    ]

    async def run() -> tuple[float, float]:
        # one question before timing opens the connection pool and warms the code paths
        await judge.judge(JudgeRequest(criteria=CRITERIA, output=f"warm-up {tag}", min_score=0.7))
        timed.seconds = 0.0
        started, cpu_started = time.perf_counter(), time.process_time()
        for request in requests:
            await judge.judge(request)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        await judge.aclose()
        return elapsed, cpu

    elapsed, cpu = asyncio.run(run())
    assert judge.stats.ok == questions + 1, judge.stats
    assert judge.stats.cache_read_tokens > 0, "the prompt cache was never read"
    return (elapsed - timed.seconds) / questions * 1e6, cpu / questions * 1e6


def ledger_micro() -> float:
    """µs per reserve + settle with a full day of minute buckets."""
    budget = SpendBudget(BudgetLimits(usd_per_hour=1e9, usd_per_day=1e9))
    now = 1_800_000_000.0
    for minute in range(1_440):
        t = now + minute * 60
        budget.settle(budget.reserve(0.01, 100, t), 0.001, 10, t)
    now += 1_440 * 60

    def step() -> None:
        budget.settle(budget.reserve(0.01, 100, now), 0.001, 10, now)

    runs = 20_000
    return min(timeit.repeat(step, number=runs, repeat=5)) / runs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--sdk-tls",
        action="store_true",
        help="open API clients the way the judge did before sharing one TLS context",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return

    names = ("without budget", "with budget")
    path: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as child:
        assert child.stdout is not None
        assert child.stdin is not None
        base_url = child.stdout.readline().strip()
        for r in range(args.rounds):
            order = [False, True] if r % 2 == 0 else [True, False]
            for budget in order:
                name = names[budget]
                judge_us, cpu_us = one_round(
                    base_url, args.questions, budget, f"{name} {r}", args.sdk_tls
                )
                path[name].append(judge_us)
                cpu[name].append(cpu_us)
        child.stdin.close()

    print(
        f"# LLM judge path per question, API call excluded ({platform.python_version()}, ", end=""
    )
    print(f"{os.cpu_count()} cores)\n")
    clients = "the SDK's default client (TLS context per client)" if args.sdk_tls else "default"
    print(f"{args.questions} questions per round, one at a time, {args.rounds} rounds, ", end="")
    print(f"API clients: {clients}\n")
    print("| µs per question | " + " | ".join(f"round {i + 1}" for i in range(args.rounds)), end="")
    print(" | median |")
    print("|---|" + "---:|" * (args.rounds + 1))
    for label, table in (("judge path (wall, API call excluded)", path), ("process CPU", cpu)):
        for name in names:
            cells = " | ".join(f"{v:.1f}" for v in table[name])
            print(f"| {label}, {name} | {cells} | {statistics.median(table[name]):.1f} |")
    print()
    for label, table in (("judge path", path), ("process CPU", cpu)):
        delta = statistics.median(table["with budget"]) - statistics.median(table["without budget"])
        print(f"budget: {delta:+.1f} µs of {label} per question (difference of the medians)")
    print(f"\nSpendBudget.reserve + settle alone, a day of buckets: {ledger_micro():.2f} µs")


if __name__ == "__main__":
    main()
