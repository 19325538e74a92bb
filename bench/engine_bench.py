#!/usr/bin/env python3
"""Benchmark of the incremental assertion engine (DESIGN §3-§4).

    .venv/bin/python bench/engine_bench.py [--signals 10000,100000] [--quick] [--profile]

Generates deterministic synthetic episodes shaped like real agent traffic (a planner -> coder
-> tester -> reviewer chain repeated until the episode is long enough, streamed text deltas
making up roughly three quarters of the signals), evaluates them against the 20-assertion
suite in `bench/suite.yaml` and prints a Markdown report:

  a. engine throughput on decoded `Signal` objects (feed every signal, then finish);
  b. throughput from raw JSONL bytes (decode_signal per line + feed);
  c. the same through the `EpisodeAssembler` (dedupe, close rules);
  d. the reference evaluator over the complete signal list;
  e. bytes of evaluation state retained by one open episode after 1k / 10k / 100k signals,
     and per episode for 1,000 concurrently open short episodes (tracemalloc).

Throughput figures are the median of several repetitions after a warm-up, on one core (a
single process). `--profile` adds cProfile hot spots of (a) and (b) on the largest run.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import inspect
import os
import platform
import pstats
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import BuiltinFunctionType, FunctionType, ModuleType
from typing import Any

import orjson

from evalstream.assertions.evaluation.assembly import CloseRules, EpisodeAssembler
from evalstream.assertions.evaluation.engine import EpisodeEvaluation, Plan
from evalstream.assertions.evaluation.facts import EpisodeFacts
from evalstream.assertions.evaluation.reference import evaluate_all
from evalstream.assertions.evaluation.reference_facts import ReferenceEpisode
from evalstream.assertions.evaluation.verdicts import Outcome
from evalstream.assertions.suite_format.suites import Suite, SuiteSet, load_suite
from evalstream.assertions.wire.pricing import PricingTable, default_pricing
from evalstream.assertions.wire.signals import (
    Signal,
    decode_signal,
    parse_timestamp,
    signal_from_obj,
)

JSON = Any
Wire = dict[str, Any]

HERE = Path(__file__).resolve().parent
SUITE_PATH = HERE / "suite.yaml"
SEED = 20260601

TARGET_DECODED = 1_000_000.0  # signals/s, decoded Signal objects, one core
TARGET_JSONL = 300_000.0  # signals/s from JSONL bytes
MEMORY_TOLERANCE = 0.10  # "independent of length": spread within 10 % (or 4 KiB)
MEMORY_SLACK_BYTES = 4096

# --------------------------------------------------------------------------------------------
# Synthetic traffic
# --------------------------------------------------------------------------------------------

MODEL = "claude-sonnet-4-5"
PROVIDER = "anthropic"
AGENTS = ("planner", "coder", "tester", "reviewer")
DONE = {
    "planner": "plan:complete",
    "coder": "code:complete",
    "tester": "tests:complete",
    "reviewer": "review:complete",
}
STATE_KEY = {"planner": "plan", "coder": "code", "tester": "tests", "reviewer": "review"}
TOOLS = {
    "planner": ("Read", "Grep"),
    "coder": ("Read", "Edit", "Edit", "Write"),
    "tester": ("Bash", "Bash", "Read"),
    "reviewer": ("Read", "Grep", "Bash"),
}
FILES = ("src/solver.py", "src/utils.py", "src/cli.py", "tests/test_solver.py", "README.md")
TASK = "Implement an interval-merging solver with tests, then open a pull request for review."
START_MS = 1_790_000_000_000
MERGE_COMMAND = "gh pr merge --squash --delete-branch 42"
FINAL_OUTPUT = (
    "Review: approved, LGTM.\n\n```python\ndef merge(intervals):\n"
    "    out = []\n    for lo, hi in sorted(intervals):\n"
    "        if out and lo <= out[-1][1]:\n            out[-1][1] = max(out[-1][1], hi)\n"
    "        else:\n            out.append([lo, hi])\n    return out\n```\n"
)
_TEXT = (
    "the interval list is sorted first so that overlapping ranges become adjacent and "
    "a single pass merges them we keep the current range and extend its end while the next "
    "start is not past it then emit it edge cases are empty input single ranges and touching "
    "bounds def merge return self tests pass coverage function review change request plan step"
)
_WORDS = _TEXT.split()
_piece_rng = random.Random(SEED)
PIECES = tuple(
    " ".join(_piece_rng.choice(_WORDS) for _ in range(_piece_rng.randint(2, 7))) + " "
    for _ in range(128)
)
SYSTEM_PROMPT = {
    agent: f"You are the {agent} of a four-agent coding pipeline. Work step by step, use tools "
    "when you need to read or change files, and finish with a short summary."
    for agent in AGENTS
}
# Upper bound of the non-delta signals (plus one delta per call) of one final round; the
# generator stops repeating rounds while this much room is left, so it can end exactly at n.
FINAL_RESERVE = 4 * (5 + 3 * 2 + 2 * 5 + 3)


def rfc3339(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Call:
    """One streamed LLM call and the tool calls it requested."""

    deltas: int
    tools: list[tuple[str, dict[str, JSON]]]


@dataclass
class Turn:
    """One agent's work: activation, LLM calls (+ tools), state, completion."""

    agent: str
    calls: list[Call]
    final: bool = False

    def fixed(self) -> int:
        """Signals other than text deltas: activated, state, text:complete, done, completed."""
        return 5 + sum(2 + 2 * len(c.tools) for c in self.calls)

    def size(self) -> int:
        return self.fixed() + sum(c.deltas for c in self.calls)


@dataclass
class Traffic:
    """Deterministic signals of one episode of exactly `n` signals, as wire objects.

    Iterating yields the signals lazily; the generator keeps only the ids it links to
    (`source.parent`), never the episode, so it can feed arbitrarily long episodes.
    """

    n: int
    seed: int = SEED
    episode_id: str = "bench-episode"
    epoch_ms: bool = False  # timestamps as epoch milliseconds instead of RFC 3339 strings
    count: int = 0
    clock: int = START_MS
    rounds: int = 0
    trigger: tuple[str, str] = ("", "")
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        if self.n < FINAL_RESERVE + 2:
            raise ValueError(f"an episode needs at least {FINAL_RESERVE + 2} signals")
        self.rng = random.Random(self.seed)

    # -- emitting -----------------------------------------------------------------------------

    def _emit(
        self,
        name: str,
        payload: JSON,
        *,
        gap: int,
        agent: str | None = None,
        parent: str | None = None,
        provider: str | None = None,
    ) -> Wire:
        self.clock += gap
        obj: Wire = {
            "id": f"sig_{self.rng.getrandbits(96):024x}",
            "episode_id": self.episode_id,
            "name": name,
            "timestamp": self.clock if self.epoch_ms else rfc3339(self.clock),
            "seq": self.count,
        }
        source = {
            k: v for k, v in (("agent", agent), ("provider", provider), ("parent", parent)) if v
        }
        if source:
            obj["source"] = source
        obj["payload"] = payload
        if self.count == 0:
            obj["attrs"] = {
                "agent_id": "code-gen-agent",
                "tenant": "bench",
                "model": MODEL,
                "run_id": f"bench-{self.seed}",
            }
        self.count += 1
        return obj

    def __iter__(self) -> Iterator[Wire]:
        rng = self.rng
        start = self._emit(
            "harness:start",
            {"agents": list(AGENTS), "state": {"task": TASK}, "input": {"task": TASK}},
            gap=0,
        )
        self.trigger = (start["id"], start["name"])
        yield start
        while True:
            turns = [self._plan_turn(agent, final=False) for agent in AGENTS]
            if self.n - 1 - self.count - sum(t.size() for t in turns) < FINAL_RESERVE:
                break
            for turn in turns:
                yield from self._turn(turn)
            self.rounds += 1
        # The final round fills the remaining room exactly: its deltas are spread over its calls.
        turns = [self._plan_turn(agent, final=True) for agent in AGENTS]
        calls = [c for t in turns for c in t.calls]
        budget = self.n - 1 - self.count - sum(t.fixed() for t in turns)
        assert budget >= len(calls), "FINAL_RESERVE is too small"
        base, extra = divmod(budget, len(calls))
        for i, call in enumerate(calls):
            call.deltas = base + (1 if i < extra else 0)
        for turn in turns:
            yield from self._turn(turn)
        self.rounds += 1
        end_gap = rng.randint(20, 80)
        yield self._emit(
            "harness:end",
            {
                "durationMs": self.clock + end_gap - START_MS,
                "output": FINAL_OUTPUT,
                "rounds": self.rounds,
            },
            gap=end_gap,
        )
        assert self.count == self.n

    # -- planning -----------------------------------------------------------------------------

    def _tool(self, agent: str) -> tuple[str, dict[str, JSON]]:
        rng = self.rng
        name = rng.choice(TOOLS[agent])
        path = rng.choice(FILES)
        if name == "Read":
            return name, {"file_path": path}
        if name == "Grep":
            return name, {"pattern": rng.choice(("def merge", "TODO", "intervals")), "path": "src"}
        if name == "Edit":
            return name, {
                "file_path": path,
                "old_string": "".join(rng.choice(PIECES) for _ in range(3)),
                "new_string": "".join(rng.choice(PIECES) for _ in range(4)),
            }
        if name == "Write":
            return name, {
                "file_path": path,
                "content": "".join(rng.choice(PIECES) for _ in range(10)),
            }
        command = rng.choice(
            ("pytest -q", "pytest -q tests/test_solver.py", "ruff check src", "git diff --stat")
        )
        return "Bash", {"command": command, "timeout": 120000}

    def _plan_turn(self, agent: str, *, final: bool) -> Turn:
        rng = self.rng
        merges = final and agent == "reviewer"
        n_calls = rng.randint(2 if merges else 1, 3)
        calls: list[Call] = []
        for i in range(n_calls):
            tools: list[tuple[str, dict[str, JSON]]] = []
            if i < n_calls - 1:  # the last call of a turn answers in text only
                tools = [self._tool(agent) for _ in range(rng.randint(1, 2))]
                if merges and i == 0:
                    tools.append(("Bash", {"command": MERGE_COMMAND, "timeout": 120000}))
            calls.append(Call(rng.randint(12, 28), tools))
        return Turn(agent, calls, final)

    # -- one agent turn -----------------------------------------------------------------------

    def _turn(self, turn: Turn) -> Iterator[Wire]:
        rng = self.rng
        agent = turn.agent
        trigger_id, trigger_name = self.trigger
        act = self._emit(
            "agent:activated",
            {"agent": agent, "trigger": trigger_name},
            gap=rng.randint(5, 30),
            agent=agent,
            parent=trigger_id,
        )
        yield act
        text = ""
        for call in turn.calls:
            began = self.clock
            start = self._emit(
                "provider:start",
                {
                    "model": MODEL,
                    "provider": PROVIDER,
                    "input": {
                        "system": SYSTEM_PROMPT[agent],
                        "messages": [{"role": "user", "content": TASK}],
                        "maxTokens": 4096,
                    },
                },
                gap=rng.randint(10, 40),
                agent=agent,
                provider=PROVIDER,
                parent=act["id"],
            )
            yield start
            pieces = [rng.choice(PIECES) for _ in range(call.deltas)]
            for i, piece in enumerate(pieces):
                gap = rng.randint(250, 900) if i == 0 else rng.randint(8, 45)
                yield self._emit("text:delta", {"content": piece}, gap=gap, agent=agent)
            text = "".join(pieces)
            tool_calls = [
                {"id": f"toolu_{rng.getrandbits(64):016x}", "name": name, "input": args}
                for name, args in call.tools
            ]
            input_tokens = rng.randint(1500, 9000)
            output_tokens = 6 * call.deltas + 40 * len(tool_calls)
            end_gap = rng.randint(20, 120)
            end = self._emit(
                "provider:end",
                {
                    "output": {
                        "content": text,
                        "toolCalls": tool_calls,
                        "usage": {
                            "inputTokens": input_tokens,
                            "outputTokens": output_tokens,
                            "totalTokens": input_tokens + output_tokens,
                        },
                    },
                    "durationMs": self.clock + end_gap - began,
                    "stopReason": "tool_use" if tool_calls else "end_turn",
                },
                gap=end_gap,
                agent=agent,
                provider=PROVIDER,
                parent=start["id"],
            )
            yield end
            for tc in tool_calls:
                call_sig = self._emit(
                    "tool:call", tc, gap=rng.randint(2, 10), agent=agent, parent=end["id"]
                )
                yield call_sig
                took = rng.randint(30, 1500)
                yield self._emit(
                    "tool:result",
                    {
                        "id": tc["id"],
                        "name": tc["name"],
                        "output": "".join(rng.choice(PIECES) for _ in range(5)),
                        "isError": False,
                        "durationMs": took,
                    },
                    gap=took,
                    agent=agent,
                    parent=call_sig["id"],
                )
        key = STATE_KEY[agent]
        value, done_payload = self._outcome(agent, final=turn.final)
        yield self._emit(
            f"state:{key}:changed", {"key": key, "newValue": value}, gap=2, agent=agent
        )
        yield self._emit("text:complete", {"content": text}, gap=1, agent=agent)
        done = self._emit(DONE[agent], done_payload, gap=1, agent=agent, parent=act["id"])
        yield done
        self.trigger = (done["id"], done["name"])
        yield self._emit("agent:completed", {"agent": agent}, gap=1, agent=agent)

    def _outcome(self, agent: str, *, final: bool) -> tuple[JSON, JSON]:
        """(new state value, completion payload) of one agent turn."""
        rng = self.rng
        if agent == "planner":
            steps = [
                f"step {i + 1}: {rng.choice(PIECES).strip()}" for i in range(rng.randint(3, 6))
            ]
            return {"steps": steps, "round": self.rounds}, {"steps": len(steps)}
        if agent == "coder":
            files = sorted(rng.sample(FILES, rng.randint(1, 3)))
            return {"content": FINAL_OUTPUT, "files": files}, {"files": files}
        if agent == "tester":
            passed = final or rng.random() < 0.5
            count = rng.randint(4, 40)
            return {"passed": passed, "count": count}, {"passed": passed, "count": count}
        verdict = "approved" if final else "changes-requested"
        return {"verdict": verdict, "comments": rng.randint(0, 5)}, {"verdict": verdict}


def wire_episode(n: int, *, seed: int = SEED, epoch_ms: bool = False) -> list[Wire]:
    return list(Traffic(n, seed=seed, episode_id=f"bench-{n}", epoch_ms=epoch_ms))


def to_jsonl(objs: Sequence[Wire]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)


# --------------------------------------------------------------------------------------------
# The measured operations
# --------------------------------------------------------------------------------------------


@dataclass
class Bench:
    suite: Suite
    suites: SuiteSet
    plan: Plan
    pricing: PricingTable

    @staticmethod
    def load() -> Bench:
        suite = load_suite(SUITE_PATH)
        suites = SuiteSet([suite])
        pricing = default_pricing()
        first = next(iter(Traffic(FINAL_RESERVE + 2)))
        plan = suites.plan_for(first["episode_id"], dict(first["attrs"]))
        if len(plan.top) != len(suite.default_assertions) or not plan.top:
            raise SystemExit("the benchmark suite does not apply to the generated episodes")
        return Bench(suite, suites, plan, pricing)

    def evaluation(self) -> EpisodeEvaluation:
        return self.plan.start(EpisodeFacts(self.pricing, MODEL))

    def engine(self, signals: Sequence[Signal]) -> EpisodeEvaluation:
        evaluation = self.evaluation()
        feed = evaluation.feed
        for sig in signals:
            feed(sig)
        evaluation.finish()
        return evaluation

    def engine_jsonl(self, data: bytes) -> EpisodeEvaluation:
        evaluation = self.evaluation()
        feed = evaluation.feed
        for line in data.splitlines():
            feed(decode_signal(line))
        evaluation.finish()
        return evaluation

    def assembler(self, dedupe_window: int | None = None) -> EpisodeAssembler:
        rules = CloseRules() if dedupe_window is None else CloseRules(dedupe_window=dedupe_window)
        return EpisodeAssembler(self.suites.plan_for, rules, pricing=self.pricing)

    def assembled(self, signals: Sequence[Signal]) -> EpisodeAssembler:
        asm = self.assembler()
        feed = asm.feed
        for sig in signals:
            feed(sig, sig.ts)
        asm.flush()
        asm.drain_early()
        return asm

    def assembled_jsonl(self, data: bytes) -> EpisodeAssembler:
        asm = self.assembler()
        feed = asm.feed
        for line in data.splitlines():
            sig = decode_signal(line)
            feed(sig, sig.ts)
        asm.flush()
        asm.drain_early()
        return asm

    def reference(self, signals: Sequence[Signal]) -> list[Outcome]:
        episode = ReferenceEpisode(list(signals), self.pricing, MODEL)
        return evaluate_all(self.suite.default_assertions, episode)


@dataclass
class Timing:
    """Seconds per repetition: CPU time of this (single-threaded) process, and wall clock."""

    cpu: list[float]
    wall: list[float]


def timed(fn: Callable[[], object], reps: int, warmup: int = 1) -> Timing:
    """Time `reps` calls after `warmup` untimed ones (the cyclic GC stays enabled).

    CPU time is the figure: on a shared machine it does not count the time the process
    waited for a core; the wall clock is reported beside it.
    """
    for _ in range(warmup):
        fn()
    timing = Timing([], [])
    for _ in range(reps):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        timing.cpu.append(time.process_time() - cpu)
        timing.wall.append(time.perf_counter() - wall)
    return timing


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------


def _decoded(traffic: Traffic) -> Iterator[Signal]:
    """Signals as a live worker sees them: serialised and decoded one at a time."""
    for obj in traffic:
        yield decode_signal(orjson.dumps(obj))


@dataclass
class Retained:
    """Memory still allocated, after a full collection, by what a measurement keeps open."""

    traced: int  # tracemalloc: every live block except the traffic generator's own
    reachable: int  # sys.getsizeof summed over objects reachable from the open state
    sites: list[str]  # the largest allocation sites of `traced`


def measure_retained(
    bench: Bench, episodes: int, n: int, *, assembler: bool, seed: int = SEED
) -> Retained:
    """Open `episodes` episodes of n signals each (fed, never finished) and weigh them.

    Signals are generated, serialised and decoded one at a time, so nothing but the open
    state (one `EpisodeEvaluation` each, or the `EpisodeAssembler` holding them) stays alive.
    """
    _warm_caches(bench)
    gc.collect()
    tracemalloc.start()
    holders: list[object] = []
    # The dedupe window is shared by every episode of an assembler (fixed size, reported on
    # its own row), so per-episode figures use a one-entry window.
    asm = bench.assembler(dedupe_window=1) if assembler else None
    for e in range(episodes):
        traffic = Traffic(n, seed=seed + e, episode_id=f"mem-{n}-{e}")
        if asm is not None:
            for sig in _decoded(traffic):
                asm.feed(sig, sig.ts)
            asm.drain_early()
        else:
            evaluation = bench.evaluation()
            for sig in _decoded(traffic):
                evaluation.feed(sig)
            holders.append(evaluation)
            del evaluation
        del sig, traffic
    if asm is not None:
        if len(asm.open) != episodes:
            raise SystemExit("the measured episodes must all stay open")
        holders.append(asm)
        del asm
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    excluded = _generator_lines()
    by_site: dict[tuple[str, int], list[int]] = {}
    for trace in snapshot.traces:
        frame = trace.traceback[0]
        if frame.filename == tracemalloc.__file__ or any(
            frame.filename == file and lo <= frame.lineno <= hi for file, lo, hi in excluded
        ):
            continue
        site = by_site.setdefault((frame.filename, frame.lineno), [0, 0])
        site[0] += trace.size
        site[1] += 1
    traced = sum(size for size, _ in by_site.values())
    sites = [
        f"`{short_path(file)}:{line}` {size:,} B in {count:,} blocks"
        for (file, line), (size, count) in sorted(by_site.items(), key=lambda kv: -kv[1][0])[:4]
    ]
    reachable = reachable_bytes(holders, shared=(bench.plan, bench.pricing, bench.suites))
    return Retained(traced, reachable, sites)


def _generator_lines() -> list[tuple[str, int, int]]:
    """(file, first line, last line) of the traffic generator's code."""
    spans = []
    for code in (rfc3339, Traffic, _decoded):
        lines, first = inspect.getsourcelines(code)
        spans.append((__file__, first, first + len(lines) - 1))
    return spans


_OPAQUE = (type, ModuleType, FunctionType, BuiltinFunctionType)


def reachable_bytes(root: object, shared: Sequence[object]) -> int:
    """sys.getsizeof over everything reachable from `root` that is not reachable from
    `shared` (the compiled plan, the pricing table, the suites), nor a type, module or
    function."""
    seen: set[int] = set()
    stack: list[object] = list(shared)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE):
            continue
        seen.add(id(obj))
        stack.extend(gc.get_referents(obj))
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total - sys.getsizeof(root)


def _warm_caches(bench: Bench) -> None:
    """Fill the process-wide caches (names, patterns, prices, dispatch) before measuring."""
    evaluation = bench.evaluation()
    asm = bench.assembler()
    for sig in _decoded(Traffic(400, episode_id="warm-up")):
        evaluation.feed(sig)
        asm.feed(sig, sig.ts)
    evaluation.finish()
    asm.flush()


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


@dataclass
class Row:
    key: str
    figure: str
    run: str
    result: str
    reps: str
    target: str = "—"
    met: bool | None = None


def per_second(n: int, timing: Timing) -> float:
    return n / statistics.median(timing.cpu)


def rate_text(n: int, timing: Timing, extra: str = "") -> str:
    cpu = timing.cpu
    median = statistics.median(cpu)
    text = f"**{n / median:,.0f} signals/s** ({median / n * 1e6:.2f} µs/signal"
    if len(cpu) > 1:
        text += f"; runs {n / max(cpu):,.0f} to {n / min(cpu):,.0f}"
    text += f"; wall clock {n / statistics.median(timing.wall):,.0f} /s"
    return text + (f"; {extra})" if extra else ")")


def mark(met: bool | None) -> str:
    return "—" if met is None else ("yes" if met else "**MISSED**")


def short_path(filename: str) -> str:
    """`package/module.py` of a source path."""
    return "/".join(filename.split("/")[-2:])


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_text(retained: Retained, per: int = 1) -> str:
    traced, reachable = retained.traced / per, retained.reachable / per
    return f"{traced:,.0f} B traced ({traced / 1024:,.1f} KiB); {reachable:,.0f} B reachable"


def verdict_rows(
    bench: Bench, evaluation: EpisodeEvaluation, signals: Sequence[Signal]
) -> list[str]:
    position = {sig.id: i for i, sig in enumerate(signals)}
    lines = [
        "| # | assertion | verdict | decided at |",
        "|---|---|---|---|",
    ]
    for result in evaluation.results():
        spec = bench.plan.assertions[result.index].spec
        if result.decided_at is None:
            when = "close"
        else:
            i = position[result.decided_at]
            when = f"signal {i + 1:,} of {len(signals):,} ({signals[i].name})"
        lines.append(
            f"| {result.index + 1} | `{spec.describe()}` | {result.verdict.value} | {when} |"
        )
    return lines


def cost_by_name(bench: Bench, signals: Sequence[Signal], reps: int) -> list[str]:
    """Engine CPU time per signal, by signal name (each name fed alone to a fresh episode)."""
    groups: dict[str, list[Signal]] = {}
    for sig in signals:
        key = "state:*:changed" if sig.name.startswith("state:") else sig.name
        groups.setdefault(key, []).append(sig)

    def feeder(group: list[Signal]) -> Callable[[], object]:
        def run() -> None:
            feed = bench.evaluation().feed
            for sig in group:
                feed(sig)

        return run

    costs = {
        name: statistics.median(timed(feeder(group), reps).cpu) for name, group in groups.items()
    }
    total = sum(costs.values())
    lines = [
        f"Engine time by signal name ({len(signals):,}-signal run; each name fed alone):",
        "",
        "| signal | count | share of signals | µs each | share of engine time | handlers |",
        "|---|---|---|---|---|---|",
    ]
    for name, spent in sorted(costs.items(), key=lambda kv: -kv[1]):
        count = len(groups[name])
        handlers = len(bench.plan.handlers(groups[name][0].name))
        lines.append(
            f"| `{name}` | {count:,} | {count / len(signals):.1%} | {spent / count * 1e6:.2f} "
            f"| {spent / total:.0%} | {handlers} |"
        )
    return [*lines, ""]


def decode_breakdown(data: bytes, reps: int) -> list[str]:
    """Where the time of decoding JSONL goes, step by step (CPU µs per signal)."""
    lines = data.splitlines()
    n = len(lines)
    loads = orjson.loads
    stamps = [loads(line)["timestamp"] for line in lines]

    def split() -> None:
        data.splitlines()

    def json_only() -> None:
        for line in lines:
            loads(line)

    def validate() -> None:
        for line in lines:
            signal_from_obj(loads(line))

    def stamps_only() -> None:
        for stamp in stamps:
            parse_timestamp(stamp)

    steps = [
        ("`bytes.splitlines`", split),
        ("`orjson.loads`", json_only),
        ("`orjson.loads` + `signal_from_obj` (= `decode_signal`)", validate),
        ("of which `parse_timestamp` (RFC 3339)", stamps_only),
    ]
    out = [
        "JSONL decoding, step by step (CPU µs per signal):",
        "",
        "| step | µs/signal |",
        "|---|---|",
    ]
    for label, fn in steps:
        spent = statistics.median(timed(fn, reps).cpu)
        out.append(f"| {label} | {spent / n * 1e6:.2f} |")
    return [*out, ""]


def profile(label: str, fn: Callable[[], object], top: int = 14) -> list[str]:
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    entries: list[tuple[float, int, float, str]] = []
    for func, (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        filename, lineno, name = func
        where = f"{short_path(filename)}:{lineno}" if filename != "~" else "builtin"
        entries.append((tottime, ncalls, cumtime, f"`{name}` ({where})"))
    entries.sort(reverse=True)
    lines = [
        f"Profile of {label} (cProfile, total {total:.2f} s; cProfile inflates call overhead):",
        "",
        "| function | calls | tottime s | share | cumtime s |",
        "|---|---|---|---|---|",
    ]
    for tottime, ncalls, cumtime, name in entries[:top]:
        lines.append(
            f"| {name} | {ncalls:,} | {tottime:.3f} | {tottime / total:.0%} | {cumtime:.3f} |"
        )
    return [*lines, ""]


# --------------------------------------------------------------------------------------------


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    traffic: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    memory_sites: list[str] = field(default_factory=list)


def measure_throughput(bench: Bench, n: int, reps: int, report: Report, *, prof: bool) -> None:
    """Figures a-d for one episode of n signals."""
    objs = wire_episode(n)
    signals = [signal_from_obj(o) for o in objs]
    data = to_jsonl(objs)
    data_ms = to_jsonl(wire_episode(n, epoch_ms=True))
    del objs
    deltas = sum(1 for s in signals if s.name == "text:delta")
    report.traffic.append(
        f"{n:,} signals: {deltas / n:.1%} text:delta, {len(data) / n:,.0f} B/signal as JSONL"
    )
    run = f"{n:,} signals"
    add = report.rows.append

    t_a = timed(lambda: bench.engine(signals), reps)
    add(
        Row(
            "a",
            "engine: feed + finish, decoded `Signal`s",
            run,
            rate_text(n, t_a),
            str(reps),
            f"≥ {TARGET_DECODED:,.0f} /s",
            per_second(n, t_a) >= TARGET_DECODED,
        )
    )
    t_b = timed(lambda: bench.engine_jsonl(data), reps)
    add(
        Row(
            "b",
            "JSONL bytes: `decode_signal` per line + feed + finish (RFC 3339 timestamps)",
            run,
            rate_text(n, t_b),
            str(reps),
            f"≥ {TARGET_JSONL:,.0f} /s",
            per_second(n, t_b) >= TARGET_JSONL,
        )
    )
    t_b2 = timed(lambda: bench.engine_jsonl(data_ms), reps)
    add(
        Row(
            "b2",
            "as b, timestamps as epoch ms (same traffic otherwise)",
            run,
            rate_text(n, t_b2),
            str(reps),
            f"≥ {TARGET_JSONL:,.0f} /s",
            per_second(n, t_b2) >= TARGET_JSONL,
        )
    )
    t_c = timed(lambda: bench.assembled(signals), reps)
    overhead = statistics.median(t_c.cpu) / statistics.median(t_a.cpu) - 1
    add(
        Row(
            "c",
            "`EpisodeAssembler` (dedupe, close rules) on decoded `Signal`s",
            run,
            rate_text(n, t_c, f"{overhead:+.0%} time vs a"),
            str(reps),
        )
    )
    t_c2 = timed(lambda: bench.assembled_jsonl(data), reps)
    add(
        Row(
            "c2",
            "JSONL bytes → `decode_signal` → `EpisodeAssembler` (a worker's whole path)",
            run,
            rate_text(n, t_c2),
            str(reps),
        )
    )
    long_run = n > 20_000
    ref_reps = 1 if long_run else 3
    t_d = timed(lambda: bench.reference(signals), ref_reps, warmup=0 if long_run else 1)
    slower = statistics.median(t_d.cpu) / statistics.median(t_a.cpu)
    add(
        Row(
            "d",
            "reference evaluator (`evaluate_all` on a `ReferenceEpisode`)",
            run,
            rate_text(n, t_d, f"{slower:.1f} x the time of a"),
            str(ref_reps),
        )
    )

    # The incremental result must equal the reference (DESIGN §4), whichever way it is fed.
    evaluation = bench.engine(signals)
    verdicts = [r.verdict for r in evaluation.results()]
    reference = [o.verdict for o in bench.reference(signals)]
    via_jsonl = [r.verdict for r in bench.engine_jsonl(data).results()]
    [closed] = bench.assembled(signals).drain_ready()
    via_assembler = [r.verdict for r in closed.evaluation.results()]
    same = verdicts == reference == via_jsonl == via_assembler
    passed = sum(1 for v in verdicts if v.value == "pass")
    report.checks.append(
        f"{n:,} signals: {passed}/{len(verdicts)} pass; engine, JSONL, assembler and "
        f"reference verdicts {'agree' if same else 'DIFFER: ' + repr((verdicts, reference))}"
    )
    report.verdicts = verdict_rows(bench, evaluation, signals)
    if prof:
        report.profiles += cost_by_name(bench, signals, reps)
        report.profiles += decode_breakdown(data, reps)
        report.profiles += profile(f"(a) on {run}", lambda: bench.engine(signals))
        report.profiles += profile(f"(b) on {run}", lambda: bench.engine_jsonl(data))


def measure_memory(
    bench: Bench, sizes: Sequence[int], short_episodes: int, short_len: int, report: Report
) -> None:
    """Figures e: one long open episode at several lengths, then many short open ones."""
    mem: dict[int, Retained] = {}
    for n in sizes:
        mem[n] = measure_retained(bench, 1, n, assembler=False)
        report.rows.append(
            Row("e", "state retained by one open `EpisodeEvaluation`", f"{n:,} signals",
                memory_text(mem[n]), "1")
        )  # fmt: skip
    traced = [m.traced for m in mem.values()]
    flat = max(traced) - min(traced) <= max(MEMORY_SLACK_BYTES, MEMORY_TOLERANCE * min(traced))
    first, last = min(mem), max(mem)
    grew = mem[last].traced - mem[first].traced
    grew_reachable = mem[last].reachable - mem[first].reachable
    report.rows.append(
        Row(
            "e",
            "... growth of that state with episode length",
            f"{first:,} → {last:,} signals",
            f"{grew:+,} B traced ({grew / (last - first) * 1000:+,.0f} B per 1,000 signals); "
            f"{grew_reachable:+,} B reachable",
            "1",
            "independent of length (±10 % or 4 KiB)",
            flat,
        )
    )
    report.memory_sites = [
        f"Largest retained allocation sites, one `EpisodeEvaluation` after {last:,} signals:",
        "",
        *(f"- {site}" for site in mem[last].sites),
    ]
    for n in sizes:
        held = measure_retained(bench, 1, n, assembler=True)
        report.rows.append(
            Row("e2", "one open episode held by an `EpisodeAssembler` (dedupe window excluded)",
                f"{n:,} signals", memory_text(held), "1")
        )  # fmt: skip
    report.rows.append(
        Row("e3", "the assembler's dedupe window, shared by all its episodes (full)",
            f"{CloseRules().dedupe_window:,} signals",
            f"{dedupe_window_bytes():,} B (sys.getsizeof of its set, keys and ring)", "1")
    )  # fmt: skip
    for assembler in (False, True):
        many = measure_retained(bench, short_episodes, short_len, assembler=assembler)
        what = "one `EpisodeAssembler`" if assembler else "`EpisodeEvaluation`s"
        report.rows.append(
            Row(
                "e2" if assembler else "e",
                f"{short_episodes:,} short episodes open at once in {what}: per episode",
                f"{short_episodes:,} episodes of {short_len:,} signals",
                memory_text(many, short_episodes),
                "1",
            )
        )


def dedupe_window_bytes() -> int:
    """Bytes held by a saturated dedupe window (its set and ring of 64-bit keys)."""
    window = CloseRules().dedupe_window
    asm = EpisodeAssembler(lambda _e, _a: Plan([]), CloseRules(dedupe_window=window))
    for i in range(window * 2):
        asm.feed(Signal(f"s{i}", f"e{i % 1000}", "text:delta", float(i)), float(i))
    ring, recent = asm._ring, asm._recent
    return sys.getsizeof(ring) + sys.getsizeof(recent) + sum(sys.getsizeof(k) for k in recent)


def loadavg() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def render(report: Report, bench: Bench, command: str, load: str) -> str:
    out = [
        "### Engine benchmark",
        "",
        f"- command: `.venv/bin/{command}`",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.machine()}, CPU: {cpu_model()} "
        f"({os.cpu_count()} logical CPUs; the benchmark runs on one); load average at start "
        f"{load}, at the end {loadavg()}",
        f"- suite: `bench/suite.yaml`, {len(bench.plan.top)} assertions "
        f"({len(bench.plan.leaves)} leaves); traffic seed {SEED}",
        f"- traffic: {'; '.join(report.traffic)}",
        "- throughput: signals per second of CPU time of the benchmark process (single "
        "threaded, so one core), median of the timed repetitions (reps) after one warm-up, "
        "GC enabled, wall-clock rate beside it; "
        "memory: tracemalloc after a full collection, the traffic generator's own blocks "
        "excluded, cross-checked by summing `sys.getsizeof` over the objects reachable from "
        "the open state (the shared compiled plan excluded)",
        "",
        "| | figure | run | result | reps | target | met |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {r.key} | {r.figure} | {r.run} | {r.result} | {r.reps} | {r.target} "
            f"| {mark(r.met)} |"
            for r in report.rows
        ),
        "",
        "Consistency: " + "; ".join(report.checks) + ".",
        "",
    ]
    if report.verdicts:
        out += ["Verdicts and where they were decided (the longest run):", ""]
        out += [*report.verdicts, ""]
    if report.memory_sites:
        out += [*report.memory_sites, ""]
    out += report.profiles
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--signals",
        default=None,
        help="comma-separated episode lengths (default 10000,100000; with --quick 10000)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 repetitions, memory up to 10k, 200 short episodes"
    )
    parser.add_argument(
        "--profile", action="store_true", help="add cProfile hot spots of a and b (longest run)"
    )
    args = parser.parse_args(argv)
    default_sizes = "10000" if args.quick else "10000,100000"
    sizes = [int(s.replace("_", "")) for s in (args.signals or default_sizes).split(",")]
    reps = 3 if args.quick else 5
    memory_sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    short_episodes = 200 if args.quick else 1_000

    load = loadavg()
    command = "python bench/engine_bench.py" + "".join(f" {a}" for a in sys.argv[1:])
    bench = Bench.load()
    report = Report()
    for n in sizes:
        measure_throughput(bench, n, reps, report, prof=args.profile and n == max(sizes))
    measure_memory(bench, memory_sizes, short_episodes, 200, report)
    print(render(report, bench, command, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
