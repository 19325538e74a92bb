#!/usr/bin/env python3
"""Regenerate the recorded episodes of the four example datasets (signal-native spec, Examples 1-4).

    python examples/make_recordings.py

rewrites ``examples/<dataset>/episodes.jsonl`` and ``examples/expected.json``. Output is
deterministic: a fixed clock per dataset, ids derived from the episode id and the signal's
position, no randomness. Standard library only.

Each episode is written down compactly as a list of :class:`Turn` objects (one agent's
work: LLM calls, tool calls, state changes, completion signals) and expanded by the
:class:`Episode` builder into realistic signal traffic: ``harness:start`` ->
``agent:activated`` (``source.parent`` = the triggering signal) -> ``provider:start`` ->
``text:delta``... -> ``provider:end`` -> ``tool:call`` / ``tool:result`` ->
``state:<key>:changed`` -> ``text:complete`` -> custom completion signal -> ... ->
``harness:end``. Every episode also carries the verdict it should get (``failing`` lists
the 0-based indices of the assertions that must not pass: the suite's defaultAssertions
first, then the case's assertions) which is written to ``expected.json``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

JSON = Any  # any JSON value

MODEL = "claude-sonnet-4-5"
PROVIDER = "anthropic"
HERE = Path(__file__).resolve().parent


def _timestamp(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds, e.g. ``2026-11-20T10:00:00.120Z``."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _chunks(text: str, parts: int) -> list[str]:
    """Split ``text`` into at most ``parts`` consecutive pieces (streaming deltas)."""
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _describe(tool: Tool) -> str:
    target = tool.input.get("file_path") or tool.input.get("command") or tool.input.get("pattern")
    return f"{tool.name} {target}" if target else tool.name


# --------------------------------------------------------------------------------------
# The builder: one episode, signal by signal
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    """One tool call made by an agent (``error`` set = the tool failed)."""

    name: str
    input: dict[str, JSON]
    result: JSON = "ok"
    duration_ms: int = 220
    error: str | None = None


class Episode:
    """Builds the signals of one episode with a fixed, strictly increasing clock."""

    def __init__(self, episode_id: str, agent_id: str, case_id: str, start: datetime) -> None:
        self.episode_id = episode_id
        self.attrs: dict[str, JSON] = {"agent_id": agent_id, "case_id": case_id, "model": MODEL}
        self.started = start
        self.now = start
        self.signals: list[dict[str, JSON]] = []
        self.names: dict[str, str] = {}  # signal id -> name
        self.latest: dict[str, str] = {}  # name -> id of the latest signal with that name
        self.state: dict[str, JSON] = {}
        self.activations = 0
        self.tool_calls = 0

    def _digest(self, kind: str, n: int) -> str:
        key = f"{self.episode_id}/{kind}/{n}".encode()
        return hashlib.sha256(key).hexdigest()[:24]  # 96 bits

    def advance(self, ms: int) -> None:
        self.now += timedelta(milliseconds=ms)

    def emit(
        self,
        name: str,
        payload: JSON,
        *,
        agent: str | None = None,
        parent: str | None = None,
        provider: str | None = None,
        after_ms: int = 3,
    ) -> str:
        """Append one signal ``after_ms`` after the previous one; return its id."""
        if self.signals:
            self.advance(max(1, after_ms))
        signal_id = "sig_" + self._digest("signal", len(self.signals))
        signal: dict[str, JSON] = {
            "id": signal_id,
            "episode_id": self.episode_id,
            "name": name,
            "timestamp": _timestamp(self.now),
            "seq": len(self.signals),
        }
        source = {"agent": agent, "parent": parent, "provider": provider}
        source = {k: v for k, v in source.items() if v is not None}
        if source:
            signal["source"] = source
        signal["payload"] = payload
        if not self.signals:
            signal["attrs"] = dict(self.attrs)
        self.signals.append(signal)
        self.names[signal_id] = name
        self.latest[name] = signal_id
        return signal_id

    # -- harness and agents -------------------------------------------------------------

    def start(self, agents: Sequence[str], state: dict[str, JSON]) -> str:
        return self.emit("harness:start", {"agents": list(agents), "state": state})

    def activate(self, agent: str, trigger: str) -> str:
        self.activations += 1
        payload = {"agent": agent, "trigger": self.names[trigger]}
        return self.emit("agent:activated", payload, agent=agent, parent=trigger, after_ms=14)

    def skip(self, agent: str, reason: str, trigger: str) -> str:
        payload = {"agent": agent, "reason": reason, "trigger": self.names[trigger]}
        return self.emit("agent:skipped", payload, agent=agent, parent=trigger, after_ms=6)

    def end(self, output: str, after_ms: int = 40) -> str:
        """``harness:end``; its durationMs is exactly the episode's first-to-last span."""
        elapsed = (self.now - self.started) // timedelta(milliseconds=1) + after_ms
        payload = {"durationMs": elapsed, "activations": self.activations, "output": output}
        return self.emit("harness:end", payload, after_ms=after_ms)

    # -- LLM calls and tools --------------------------------------------------------------

    def llm(
        self,
        agent: str,
        text: str,
        *,
        tools: Sequence[Tool] = (),
        input_tokens: int = 2400,
        output_tokens: int | None = None,
        duration_ms: int | None = None,
    ) -> str:
        """One streamed LLM call (plus the tool calls it requested); returns provider:end id."""
        out_tokens = output_tokens or (
            60 + len(text) // 3 + sum(40 + len(json.dumps(t.input)) // 3 for t in tools)
        )
        duration = duration_ms or 600 + 12 * out_tokens
        start_id = self.emit(
            "provider:start",
            {"model": MODEL, "provider": PROVIDER},
            agent=agent,
            provider=PROVIDER,
            after_ms=25,
        )
        began = self.now
        deltas = _chunks(text, 4)
        first_token = duration * 3 // 10
        for i, piece in enumerate(deltas):
            at = began + timedelta(
                milliseconds=first_token + (duration - first_token - 20) * i // len(deltas)
            )
            gap = max(1, (at - self.now) // timedelta(milliseconds=1))
            self.emit("text:delta", {"content": piece}, agent=agent, after_ms=gap)
        calls = []
        for tool in tools:
            self.tool_calls += 1
            calls.append(
                {
                    "id": "toolu_" + self._digest("tool", self.tool_calls),
                    "name": tool.name,
                    "input": tool.input,
                }
            )
        finish = max(
            1, (began + timedelta(milliseconds=duration) - self.now) // timedelta(milliseconds=1)
        )
        end_id = self.emit(
            "provider:end",
            {
                "output": {
                    "content": text,
                    "toolCalls": calls,
                    "usage": {
                        "inputTokens": input_tokens,
                        "outputTokens": out_tokens,
                        "totalTokens": input_tokens + out_tokens,
                    },
                },
                "durationMs": duration,
            },
            agent=agent,
            provider=PROVIDER,
            parent=start_id,
            after_ms=finish,
        )
        for tool, call in zip(tools, calls, strict=True):
            call_id = self.emit("tool:call", call, agent=agent, parent=end_id, after_ms=12)
            if tool.error is None:
                result = {"id": call["id"], "result": tool.result}
                self.emit(
                    "tool:result", result, agent=agent, parent=call_id, after_ms=tool.duration_ms
                )
            else:
                failed = {"id": call["id"], "result": None, "error": tool.error}
                self.emit(
                    "tool:result", failed, agent=agent, parent=call_id, after_ms=tool.duration_ms
                )
                self.emit(
                    "error:tool",
                    {"tool": tool.name, "message": tool.error, "agent": agent},
                    agent=agent,
                    parent=call_id,
                )
        return end_id

    def provider_error(self, agent: str) -> None:
        """A failed LLM call (HTTP 529), followed by the harness's retry back-off."""
        start_id = self.emit(
            "provider:start",
            {"model": MODEL, "provider": PROVIDER},
            agent=agent,
            provider=PROVIDER,
            after_ms=25,
        )
        self.emit(
            "provider:error",
            {"error": "overloaded_error: Overloaded", "code": 529},
            agent=agent,
            provider=PROVIDER,
            parent=start_id,
            after_ms=1850,
        )
        self.advance(2000)

    # -- state and custom signals ---------------------------------------------------------

    def set_state(self, key: str, value: JSON, agent: str) -> str:
        payload = {
            "key": key,
            "oldValue": deepcopy(self.state.get(key)),
            "newValue": deepcopy(value),
            "agent": agent,
        }
        self.state[key] = deepcopy(value)
        return self.emit(f"state:{key}:changed", payload, agent=agent)

    def text_complete(self, agent: str, content: str) -> str:
        return self.emit("text:complete", {"content": content}, agent=agent)

    def signal(self, name: str, payload: JSON, agent: str) -> str:
        return self.emit(name, payload, agent=agent, after_ms=4)


# --------------------------------------------------------------------------------------
# Compact episode descriptions
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One agent's share of an episode.

    By default the agent is activated by the previous turn's last completion signal (the
    first one by ``harness:start``); ``trigger`` names another signal instead. ``skip``
    records ``agent:skipped`` instead of running; ``resume`` continues the agent's current
    activation. The agent first makes one LLM call requesting ``tools`` (if any), then
    ``drafts`` + ``text`` as further calls, then applies ``state``, emits ``text:complete``
    and finally its ``emits``.
    """

    agent: str
    text: str = ""
    tools: tuple[Tool, ...] = ()
    state: tuple[tuple[str, JSON], ...] = ()
    emits: tuple[tuple[str, JSON], ...] = ()
    skip: str | None = None
    trigger: str | None = None
    resume: bool = False
    overloaded: bool = False
    drafts: tuple[str, ...] = ()
    input_tokens: int = 2400
    output_tokens: int | None = None
    duration_ms: int | None = None


@dataclass(frozen=True)
class Run:
    """One recorded episode of a case, with the verdict it must get."""

    episode_id: str
    case_id: str
    turns: tuple[Turn, ...]
    output: str
    failing: tuple[int, ...] = ()
    why: str = ""


@dataclass(frozen=True)
class Dataset:
    directory: str
    agent_id: str
    agents: tuple[str, ...]
    inputs: dict[str, dict[str, JSON]]
    start: datetime
    runs: list[Run] = field(default_factory=list)


def play(dataset: Dataset, run: Run, start: datetime) -> Episode:
    """Expand a compact run into its signals."""
    ep = Episode(run.episode_id, dataset.agent_id, run.case_id, start)
    last_done = ep.start(dataset.agents, dataset.inputs[run.case_id])
    for turn in run.turns:
        trigger = ep.latest[turn.trigger] if turn.trigger else last_done
        if turn.skip is not None:
            ep.skip(turn.agent, turn.skip, trigger)
            continue
        if not turn.resume:
            ep.activate(turn.agent, trigger)
        if turn.overloaded:
            ep.provider_error(turn.agent)
        if turn.tools:
            prelude = "Calling " + ", ".join(_describe(t) for t in turn.tools) + "."
            ep.llm(turn.agent, prelude, tools=turn.tools, input_tokens=turn.input_tokens)
        for text in (*turn.drafts, turn.text):
            if text:
                ep.llm(
                    turn.agent,
                    text,
                    input_tokens=turn.input_tokens,
                    output_tokens=turn.output_tokens,
                    duration_ms=turn.duration_ms,
                )
        for key, value in turn.state:
            ep.set_state(key, value, turn.agent)
        if turn.text:
            ep.text_complete(turn.agent, turn.text)
        for name, payload in turn.emits:
            last_done = ep.signal(name, payload, turn.agent)
    ep.end(run.output)
    return ep


def write(dataset: Dataset) -> dict[str, JSON]:
    """Write ``<directory>/episodes.jsonl``; return this dataset's expected verdicts."""
    lines: list[str] = []
    expected: dict[str, JSON] = {}
    for i, run in enumerate(dataset.runs):
        episode = play(dataset, run, dataset.start + timedelta(minutes=10 * i, milliseconds=120))
        lines.extend(
            json.dumps(s, ensure_ascii=False, separators=(",", ":")) for s in episode.signals
        )
        expected[run.episode_id] = {
            "case_id": run.case_id,
            "passed": not run.failing,
            "failing": list(run.failing),
            "why": run.why or "Reference run: every default and case assertion holds.",
        }
    path = HERE / dataset.directory / "episodes.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return expected


# --------------------------------------------------------------------------------------
# Example 1: code review (reviewer -> fixer).  defaultAssertions: 0 latency<=30s,
# 1 signal.not error:*, 2 trajectory start/activated/end.
# --------------------------------------------------------------------------------------


def review(
    episode_id: str,
    case_id: str,
    findings: str,
    fix: str | None,
    *,
    issues: int = 1,
    failing: tuple[int, ...] = (),
    why: str = "",
    fixer_trigger: str | None = None,
    overloaded: bool = False,
    input_tokens: int = 2100,
    duration_ms: int | None = None,
) -> Run:
    """reviewer -> review:complete -> fixer -> fix:proposed (fixer skipped when no fix)."""
    reviewer = Turn(
        "reviewer",
        findings,
        state=(("review", {"issues": issues, "summary": findings.split(":", maxsplit=1)[0]}),),
        emits=(("review:complete", {"issues": issues}),),
        overloaded=overloaded,
        input_tokens=input_tokens,
        duration_ms=duration_ms,
    )
    if fix is None:
        fixer = Turn("fixer", skip="review reported nothing to fix")
        output = findings
    else:
        fixer = Turn(
            "fixer",
            fix,
            state=(("fix", {"proposed": True}),),
            emits=(("fix:proposed", {"summary": fix.split("\n")[0]}),),
            trigger=fixer_trigger,
        )
        output = findings + "\n\n" + fix
    return Run(episode_id, case_id, (reviewer, fixer), output, failing, why)


SQL_FIX = (
    "Proposed fix: use a parameterized query.\n"
    "```ts\nasync function getUser(userId: string) {\n"
    "  return db.query('SELECT * FROM users WHERE id = $1', [userId]);\n}\n```"
)
SQL_FINDINGS = (
    "SQL injection (critical): getUser interpolates userId straight into the SQL text, "
    "so an input such as `1 OR 1=1` rewrites the query. Pass the value as a bound parameter."
)

CODE_REVIEW = Dataset(
    "code-review",
    "code-review-agent",
    ("reviewer", "fixer"),
    {
        "sql-injection": {
            "code": "async function getUser(userId) {\n"
            "  const query = `SELECT * FROM users WHERE id = ${userId}`;\n"
            "  return db.query(query);\n}\n",
            "language": "typescript",
        },
        "xss-vulnerability": {
            "code": "function renderComment(comment) {\n"
            "  document.getElementById('comments').innerHTML = comment.text;\n}\n",
            "language": "javascript",
        },
        "path-traversal": {
            "code": "app.get('/files/:filename', (req, res) => {\n"
            "  const filepath = path.join('/uploads', req.params.filename);\n"
            "  res.sendFile(filepath);\n});\n",
            "language": "javascript",
        },
        "division-by-zero": {
            "code": "function calculateAverage(numbers) {\n"
            "  const sum = numbers.reduce((a, b) => a + b, 0);\n"
            "  return sum / numbers.length;\n}\n",
            "language": "typescript",
        },
        "null-dereference": {
            "code": "async function getUsername(userId) {\n"
            "  const user = await db.findUser(userId);\n"
            "  return user.name;\n}\n",
            "language": "typescript",
        },
        "race-condition": {
            "code": "let counter = 0;\n\nasync function incrementCounter() {\n"
            "  const current = counter;\n  await delay(100);\n"
            "  counter = current + 1;\n}\n",
            "language": "typescript",
        },
        "unused-variable": {
            "code": "function processData(input) {\n"
            "  const temp = input.toLowerCase();\n  const unused = 42;\n"
            "  return temp.trim();\n}\n",
            "language": "typescript",
        },
        "magic-numbers": {
            "code": "function calculateDiscount(price) {\n  if (price > 100) {\n"
            "    return price * 0.9;\n  }\n  return price * 0.95;\n}\n",
            "language": "typescript",
        },
        "clean-code-no-issues": {
            "code": "async function getUser(userId: string): Promise<User | null> {\n"
            "  const user = await db.query('SELECT * FROM users WHERE id = $1', [userId]);\n"
            "  return user ?? null;\n}\n",
            "language": "typescript",
        },
        "empty-function": {
            "code": "function placeholder() {\n  // TODO: implement\n}\n",
            "language": "typescript",
        },
        "very-long-file": {"code": "[200 lines of code here]", "language": "typescript"},
    },
    datetime(2026, 11, 20, 10, 0, tzinfo=UTC),
)

CODE_REVIEW.runs.extend(
    [
        review("cr-sql-injection-pass", "sql-injection", SQL_FINDINGS, SQL_FIX),
        review(
            "cr-xss-vulnerability-pass",
            "xss-vulnerability",
            "XSS (critical): renderComment assigns untrusted comment.text to innerHTML, so a "
            "comment containing <img src=x onerror=...> runs script in every reader's browser.",
            "Proposed fix: render the comment as text.\n```js\nfunction renderComment(comment) {\n"
            "  document.getElementById('comments').textContent = comment.text;\n}\n```\n"
            "If markup is required, sanitize it with DOMPurify first.",
        ),
        review(
            "cr-path-traversal-pass",
            "path-traversal",
            "Path traversal (high): req.params.filename may contain ../ sequences (for example "
            "..%2F..%2Fetc%2Fpasswd) and path.join resolves them outside /uploads.",
            "Proposed fix: resolve the path and reject anything outside the upload root.\n```js\n"
            "const root = path.resolve('/uploads');\n"
            "const filepath = path.resolve(root, req.params.filename);\n"
            "if (!filepath.startsWith(root + path.sep)) return res.status(400).end();\n"
            "res.sendFile(filepath);\n```",
        ),
        review(
            "cr-division-by-zero-pass",
            "division-by-zero",
            "Division by zero (medium): for an empty array numbers.length is 0, so "
            "calculateAverage returns NaN.",
            "Proposed fix: guard the empty case.\n```ts\nif (numbers.length === 0) return 0;\n```",
        ),
        review(
            "cr-null-dereference-pass",
            "null-dereference",
            "Null dereference (high): db.findUser resolves to null or undefined for an unknown "
            "id, and user.name then throws a TypeError.",
            "Proposed fix: use optional chaining.\n```ts\nreturn user?.name;\n```\n"
            "or guard explicitly with `if (user)` and return a default.",
        ),
        review(
            "cr-race-condition-pass",
            "race-condition",
            "Race condition (medium): two concurrent incrementCounter calls both read counter "
            "before either writes it back, so one increment is lost.",
            "Proposed fix: make the read-modify-write atomic (increment after the await, or "
            "serialise callers with a mutex).\n```ts\nasync function incrementCounter() {\n"
            "  await delay(100);\n  counter += 1;\n}\n```",
        ),
        review(
            "cr-unused-variable-pass",
            "unused-variable",
            "Cleanup (low): `const unused = 42` is an unused variable; nothing reads it.",
            "Proposed fix: delete the line `const unused = 42;`.",
        ),
        review(
            "cr-magic-numbers-pass",
            "magic-numbers",
            "Readability (low): 100, 0.9 and 0.95 are magic numbers; their meaning is not "
            "visible where they are used.",
            "Proposed fix: extract named constants.\n```ts\nconst BULK_THRESHOLD = 100;\n"
            "const BULK_DISCOUNT = 0.9;\nconst STANDARD_DISCOUNT = 0.95;\n```",
        ),
        review(
            "cr-clean-code-no-issues-pass",
            "clean-code-no-issues",
            "No issues found: the query binds userId as the $1 parameter, the return type "
            "covers the missing-user case and `user ?? null` normalises undefined.",
            None,
            issues=0,
        ),
        review(
            "cr-empty-function-pass",
            "empty-function",
            "No defects: placeholder is an empty stub with a TODO. Consider throwing "
            "`new Error('not implemented')` so callers fail loudly instead of getting undefined.",
            None,
            issues=0,
            input_tokens=900,
        ),
        review(
            "cr-very-long-file-pass",
            "very-long-file",
            "Reviewed all 200 lines; two findings: (1) parseConfig swallows JSON errors in an "
            "empty catch; (2) retry() has no upper bound on attempts.",
            "Proposed fix: rethrow with context in parseConfig's catch block and cap retry() "
            "at 5 attempts with exponential back-off.",
            issues=2,
            input_tokens=14000,
            duration_ms=15500,
        ),
        # ---- failing episodes --------------------------------------------------------------
        review(
            "cr-sql-injection-fail-missed",
            "sql-injection",
            "Unsafe query construction (high): getUser builds the SQL string with template "
            "interpolation of userId. Prefer a parameterized query with a $1 placeholder.",
            SQL_FIX,
            failing=(3,),
            why="The review flags the interpolated SQL but never names the injection, so "
            "output.contains 'injection' fails; everything else passes.",
        ),
        review(
            "cr-sql-injection-fail-uncaused",
            "sql-injection",
            SQL_FINDINGS,
            SQL_FIX,
            fixer_trigger="text:complete",
            failing=(7,),
            why="The fixer is activated after review:complete but its source.parent is the "
            "reviewer's text:complete, so agent.causedBy(fixer, review:complete) fails while "
            "the ordered trajectory still passes.",
        ),
        review(
            "cr-division-by-zero-fail-provider-error",
            "division-by-zero",
            "Division by zero (medium): for an empty array numbers.length is 0, so "
            "calculateAverage returns NaN.",
            "Proposed fix: guard the empty case.\n```ts\nif (numbers.length === 0) return 0;\n```",
            overloaded=True,
            failing=(4,),
            why="The reviewer's first LLM call ends in provider:error (529), so "
            "agent.completed(reviewer) fails even though the retry produced a correct review; "
            "provider:error does not match the default signal.not 'error:*'.",
        ),
        review(
            "cr-clean-code-no-issues-fail-false-positive",
            "clean-code-no-issues",
            "SQL injection vulnerability (critical): userId is passed to db.query without "
            "validation.",
            "Proposed fix: validate userId as a UUID before querying.",
            failing=(3, 4),
            why="False positive on a parameterized query: the output mentions both "
            "'injection' and 'vulnerability', failing both output.notContains assertions.",
        ),
    ]
)


# --------------------------------------------------------------------------------------
# Example 2: code generation (planner -> coder -> tester -> reviewer).
# defaultAssertions: 0 cost<=$0.50, 1 signal.not error:*.
# --------------------------------------------------------------------------------------

FIB_CODE = (
    "export function fibonacci(n: number): number {\n"
    "  if (n < 0 || !Number.isInteger(n)) throw new RangeError('n must be a natural number');\n"
    "  if (n < 2) return n;\n"
    "  let [prev, curr] = [0, 1];\n"
    "  for (let i = 2; i <= n; i++) [prev, curr] = [curr, prev + curr];\n"
    "  return curr;\n}\n"
)
BSEARCH_CODE = (
    "export function binarySearch(items: readonly number[], target: number): number {\n"
    "  let lo = 0;\n  let hi = items.length - 1;\n"
    "  while (lo <= hi) {\n    const mid = (lo + hi) >>> 1;\n"
    "    if (items[mid] === target) return mid;\n"
    "    if (items[mid] < target) lo = mid + 1;\n    else hi = mid - 1;\n  }\n"
    "  return -1;\n}\n"
)
ROUTER_CODE = (
    "import { Router } from 'express';\nimport { z } from 'zod';\n\n"
    "const Registration = z.object({ email: z.string().email(), "
    "password: z.string().min(12) });\n\n"
    "export const router = Router();\n\n"
    "router.post('/register', async (req, res) => {\n"
    "  const parsed = Registration.safeParse(req.body);\n"
    "  if (!parsed.success) return res.status(400).json(parsed.error.flatten());\n"
    "  const user = await users.create(parsed.data);\n"
    "  return res.status(201).json({ id: user.id });\n});\n"
)
UTILS_CODE = (
    "export function clamp(value: number, min: number, max: number): number {\n"
    "  return Math.min(max, Math.max(min, value));\n}\n"
)
MATH_TESTS = (
    "import { describe, expect, it } from 'vitest';\nimport { add, divide } from '../src/math';\n"
    "\ndescribe('math', () => {\n  it('adds', () => expect(add(2, 3)).toBe(5));\n"
    "  it('rejects division by zero', () => expect(() => divide(1, 0)).toThrow());\n});\n"
)


def vitest(path: str, count: int) -> Tool:
    summary = f" ✓ {path} ({count} tests)\n Test Files  1 passed (1)\n Tests  {count} passed"
    return Tool("Bash", {"command": f"npx vitest run {path}"}, summary, duration_ms=1900)


def planner_turn(steps: Sequence[str], *, feasible: bool = True) -> Turn:
    text = "Plan:\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    return Turn(
        "planner",
        text,
        state=(("plan", {"steps": list(steps), "feasible": feasible}),),
        emits=(("plan:complete", {"steps": len(steps), "feasible": feasible}),),
    )


def coder_turn(
    path: str,
    code: str,
    summary: str,
    *,
    extra: tuple[Tool, ...] = (),
    drafts: tuple[str, ...] = (),
    input_tokens: int = 2400,
    output_tokens: int | None = None,
    duration_ms: int | None = None,
) -> Turn:
    return Turn(
        "coder",
        summary,
        tools=(Tool("Write", {"file_path": path, "content": code}, "File created"), *extra),
        state=(("code", {"path": path, "content": code}),),
        emits=(("code:complete", {"path": path}),),
        drafts=drafts,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        duration_ms=duration_ms,
    )


def qa_turn(path: str, count: int) -> Turn:
    """The tester agent: writes tests, runs them with vitest."""
    tests = f"import {{ describe, it, expect }} from 'vitest';\n// {count} cases\n"
    return Turn(
        "tester",
        f"Wrote {count} tests in {path}; all pass.",
        tools=(
            Tool("Write", {"file_path": path, "content": tests}, "File created"),
            vitest(path, count),
        ),
        state=(("tests", {"passed": True, "count": count, "file": path}),),
        emits=(("tests:complete", {"passed": True, "count": count}),),
    )


def code_reviewer(text: str) -> Turn:
    return Turn(
        "reviewer",
        text,
        state=(("review", {"approved": True}),),
        emits=(("review:complete", {"approved": True}),),
    )


FIB_PLAN = (
    "Return n directly for the base cases n=0 and n=1",
    "Iterate from 2 to n keeping only the previous two values (O(n) time, O(1) space)",
    "Reject negative and non-integer n",
)
FIB_OUTPUT = (
    "```ts\n" + FIB_CODE + "```\n"
    "Iterative fibonacci: O(n) time, O(1) space; n=0 and n=1 are the base cases. 5 tests pass."
)
FIB_CODER = coder_turn("src/fibonacci.ts", FIB_CODE, "Implemented fibonacci iteratively.")
FIB_TESTER = qa_turn("tests/fibonacci.test.ts", 5)
FIB_REVIEWER = code_reviewer("Approved: linear time, constant space, base cases covered.")

ROUTER_OUTPUT = (
    "```ts\n" + ROUTER_CODE + "```\n"
    "POST /register validates the body with zod and answers 400 on invalid input. "
    "4 tests cover valid, missing email, short password and duplicate user."
)
ROUTER_PLAN = (
    "Define a zod schema for email and password",
    "Add an express router with POST /register",
    "Return 400 with validation errors, 201 with the new id",
)

NOT_CODED = "the plan marked the task infeasible"
UNCLEAR = "waiting for clarification"

CODE_GENERATION = Dataset(
    "code-generation",
    "code-gen-agent",
    ("planner", "coder", "tester", "reviewer"),
    {
        "fibonacci-function": {
            "task": "Write a function that returns the nth fibonacci number",
            "language": "typescript",
            "requirements": [
                "Must handle n=0 and n=1 as base cases",
                "Must be efficient (no exponential recursion)",
            ],
        },
        "binary-search": {
            "task": "Write a binary search function for a sorted array",
            "language": "typescript",
        },
        "rest-endpoint": {
            "task": "Create a REST endpoint for user registration with validation",
            "language": "typescript",
            "framework": "express",
        },
        "impossible-task": {"task": "Write a function that solves P=NP", "language": "typescript"},
        "ambiguous-task": {"task": "Make it better", "language": "typescript"},
        "file-creation-tools": {
            "task": "Create a new file called utils.ts with a helper function",
            "language": "typescript",
        },
        "test-execution-tools": {
            "task": "Write and run tests for the math module",
            "language": "typescript",
        },
    },
    datetime(2026, 11, 20, 12, 0, tzinfo=UTC),
)

CODE_GENERATION.runs.extend(
    [
        Run(
            "cg-fibonacci-function-pass",
            "fibonacci-function",
            (planner_turn(FIB_PLAN), FIB_CODER, FIB_TESTER, FIB_REVIEWER),
            FIB_OUTPUT,
        ),
        Run(
            "cg-binary-search-pass",
            "binary-search",
            (
                planner_turn(
                    ("Halve the search range on a sorted array", "Return the index or -1")
                ),
                coder_turn("src/binary-search.ts", BSEARCH_CODE, "Implemented binarySearch."),
                qa_turn("tests/binary-search.test.ts", 6),
                code_reviewer("Approved: unsigned shift avoids overflow; empty array handled."),
            ),
            "```ts\n" + BSEARCH_CODE + "```\nbinarySearch runs in O(log n) and returns -1 when "
            "the target is absent. 6 tests pass.",
        ),
        Run(
            "cg-rest-endpoint-pass",
            "rest-endpoint",
            (
                planner_turn(ROUTER_PLAN),
                coder_turn(
                    "src/routes/register.ts", ROUTER_CODE, "Implemented the registration router."
                ),
                qa_turn("tests/register.test.ts", 4),
                code_reviewer("Approved: input validated before any database access."),
            ),
            ROUTER_OUTPUT,
        ),
        Run(
            "cg-impossible-task-pass",
            "impossible-task",
            (
                Turn(
                    "planner",
                    "This cannot be implemented: whether P equals NP is an open problem, and no "
                    "function can 'solve' it. Stopping before any code is written.",
                    state=(
                        (
                            "plan",
                            {
                                "steps": [],
                                "feasible": False,
                                "reason": "P vs NP is an open problem",
                            },
                        ),
                    ),
                    emits=(("plan:complete", {"steps": 0, "feasible": False}),),
                ),
                Turn("coder", skip=NOT_CODED),
                Turn("tester", skip=NOT_CODED),
                Turn("reviewer", skip=NOT_CODED),
            ),
            "I cannot write this function: P vs NP is an open problem, so a function that "
            "'solves' it is infeasible. If you need a practical tool, I can write a SAT solver "
            "for small instances (NP-hard problems are still solvable for small n).",
        ),
        Run(
            "cg-ambiguous-task-pass",
            "ambiguous-task",
            (
                Turn(
                    "planner",
                    "The request 'Make it better' names no target and no goal.",
                    state=(("plan", {"steps": [], "feasible": True, "needsClarification": True}),),
                    emits=(
                        (
                            "clarification:needed",
                            {"question": "Which file should be improved, and better in what way?"},
                        ),
                    ),
                ),
                Turn("coder", skip=UNCLEAR),
                Turn("tester", skip=UNCLEAR),
                Turn("reviewer", skip=UNCLEAR),
            ),
            "Could you clarify the request? Which file or function should I improve, and what "
            "should be better: performance, readability or test coverage?",
        ),
        Run(
            "cg-file-creation-tools-pass",
            "file-creation-tools",
            (
                planner_turn(("Create utils.ts with the Write tool", "Add a pure clamp() helper")),
                Turn(
                    "coder",
                    "Created utils.ts with clamp().",
                    tools=(
                        Tool(
                            "Write",
                            {"file_path": "/workspace/utils.ts", "content": UTILS_CODE},
                            "File created",
                        ),
                    ),
                    state=(
                        ("code", {"path": "utils.ts", "content": UTILS_CODE}),
                        ("files", ["utils.ts"]),
                    ),
                    emits=(("code:complete", {"path": "utils.ts"}),),
                ),
                Turn("tester", skip="the task asks for no tests"),
                code_reviewer("Approved: small pure helper, exported."),
            ),
            "Created utils.ts with a `clamp(value, min, max)` helper function.",
        ),
        Run(
            "cg-test-execution-tools-pass",
            "test-execution-tools",
            (
                planner_turn(
                    ("Read src/math.ts", "Write tests/math.test.ts", "Run the tests with vitest")
                ),
                Turn(
                    "coder",
                    "src/math.ts already exports add and divide; no code changes needed.",
                    tools=(
                        Tool(
                            "Read",
                            {"file_path": "src/math.ts"},
                            "export const add = ...\nexport const divide = ...",
                        ),
                    ),
                    emits=(("code:complete", {"path": "src/math.ts", "changed": False}),),
                ),
                Turn(
                    "tester",
                    "Wrote tests/math.test.ts and ran them: 2 passed.",
                    tools=(
                        Tool(
                            "Write",
                            {"file_path": "tests/math.test.ts", "content": MATH_TESTS},
                            "File created",
                        ),
                        vitest("tests/math.test.ts", 2),
                    ),
                    state=(("tests", {"passed": True, "count": 2, "file": "tests/math.test.ts"}),),
                    emits=(("tests:complete", {"passed": True, "count": 2}),),
                ),
                code_reviewer("Approved: covers the happy path and division by zero."),
            ),
            "Wrote tests/math.test.ts (add, division by zero) and ran `npx vitest run`: "
            "2 tests passed.",
        ),
        # ---- failing episodes --------------------------------------------------------------
        Run(
            "cg-fibonacci-function-fail-order",
            "fibonacci-function",
            (
                planner_turn(FIB_PLAN),
                FIB_CODER,
                Turn(
                    "reviewer",
                    "Approved: linear time, constant space, base cases covered.",
                    state=(("review", {"approved": True}),),
                    emits=(("review:complete", {"approved": True}),),
                ),
                FIB_TESTER,
            ),
            FIB_OUTPUT,
            failing=(2,),
            why="The reviewer runs before the tester (code -> review -> tests), so no reviewer "
            "activation follows tests:complete and the ordered trajectory fails; all other "
            "assertions, including exactly 4 activations, pass.",
        ),
        Run(
            "cg-rest-endpoint-fail-cost",
            "rest-endpoint",
            (
                planner_turn(ROUTER_PLAN),
                coder_turn(
                    "src/routes/register.ts",
                    ROUTER_CODE,
                    "Implemented the registration router.",
                    drafts=(
                        "Draft 1: generated a full user module with ORM models and migrations.",
                        "Draft 2: regenerated everything with class-validator instead of zod.",
                    ),
                    input_tokens=22000,
                    output_tokens=8500,
                    duration_ms=95000,
                ),
                qa_turn("tests/register.test.ts", 4),
                code_reviewer("Approved: input validated before any database access."),
            ),
            ROUTER_OUTPUT,
            failing=(0,),
            why="The coder regenerated the whole module three times with a 22,000-token "
            "context (8,500 output tokens per draft), so the cost computed from usage is "
            "about $0.69, over the $0.50 budget; the output itself is correct.",
        ),
        Run(
            "cg-impossible-task-fail-not-skipped",
            "impossible-task",
            (
                planner_turn(("Model the problem as SAT", "Write an exhaustive solver")),
                coder_turn(
                    "src/solve.ts",
                    "export function solveSat(clauses: number[][]): boolean[] | null {\n"
                    "  /* try all 2^n assignments */\n}\n",
                    "Implemented solveSat by exhaustive search.",
                ),
                qa_turn("tests/solve.test.ts", 3),
                code_reviewer("Approved with caveat: exponential time."),
            ),
            "Implemented `solveSat` as an exhaustive search over assignments. Note: it runs in "
            "exponential time and cannot be considered a proof that P=NP.",
            failing=(3,),
            why="The planner treated the task as feasible and the coder was activated instead "
            "of skipped, so agent.skipped(coder) fails.",
        ),
        Run(
            "cg-file-creation-tools-fail-bash",
            "file-creation-tools",
            (
                planner_turn(("Create utils.ts with the Write tool", "Add a pure clamp() helper")),
                Turn(
                    "coder",
                    "Created utils.ts with clamp() and type-checked it.",
                    tools=(
                        Tool(
                            "Write",
                            {"file_path": "/workspace/utils.ts", "content": UTILS_CODE},
                            "File created",
                        ),
                        Tool(
                            "Bash", {"command": "npx tsc --noEmit utils.ts"}, "", duration_ms=2600
                        ),
                    ),
                    state=(
                        ("code", {"path": "utils.ts", "content": UTILS_CODE}),
                        ("files", ["utils.ts"]),
                    ),
                    emits=(("code:complete", {"path": "utils.ts"}),),
                ),
                Turn("tester", skip="the task asks for no tests"),
                code_reviewer("Approved: small pure helper, exported."),
            ),
            "Created utils.ts with a `clamp(value, min, max)` helper function.",
            failing=(3,),
            why="The coder wrote utils.ts correctly but then ran Bash (tsc), a tool the case "
            "says must not be called, so tool.notCalled(Bash) fails.",
        ),
    ]
)


# --------------------------------------------------------------------------------------
# Example 3: refactoring (analyzer -> planner -> refactorer -> verifier).
# defaultAssertions: 0 signal.not error:*, 1 latency<=120s.
# --------------------------------------------------------------------------------------

RENAME_FILES = ["src/api.ts", "src/handler.ts", "tests/api.test.ts"]
RENAME_GREP = Tool(
    "Grep",
    {"pattern": "getData", "path": "."},
    "src/api.ts:1:export function getData() { ... }\n"
    "src/handler.ts:1:import { getData } from './api'; getData();\n"
    "tests/api.test.ts:1:import { getData } from '../src/api';",
)
RENAME_OUTPUT = (
    "Renamed getData to fetchData in 3 files: src/api.ts (definition), src/handler.ts "
    "(import and call) and tests/api.test.ts (import). Type-check and tests pass."
)


def edit(path: str, old: str, new: str, error: str | None = None) -> Tool:
    return Tool(
        "Edit",
        {"file_path": path, "old_string": old, "new_string": new},
        "File updated",
        error=error,
    )


def analyzer(tool: Tool, files: Sequence[str]) -> Turn:
    return Turn(
        "analyzer",
        f"Affected files: {', '.join(files)}.",
        tools=(tool,),
        state=(("analysis", {"affectedFiles": len(files), "files": list(files)}),),
        emits=(("analysis:complete", {"affectedFiles": len(files)}),),
    )


def refactor_plan(steps: Sequence[str]) -> Turn:
    return Turn(
        "planner",
        "Plan: " + "; ".join(steps) + ".",
        state=(("plan", {"steps": list(steps)}),),
        emits=(("plan:complete", {"steps": len(steps)}),),
    )


def verifier(tests: int) -> Turn:
    return Turn(
        "verifier",
        f"tsc: no errors. vitest: {tests} passed.",
        tools=(
            Tool("Bash", {"command": "npx tsc --noEmit"}, "", duration_ms=4200),
            Tool("Bash", {"command": "npx vitest run"}, f"Tests  {tests} passed", duration_ms=3100),
        ),
        state=(("verification", {"passed": True, "typecheck": "ok", "tests": tests}),),
        emits=(("verification:complete", {"passed": True}),),
    )


def refactorer(text: str, tools: tuple[Tool, ...], modified: int) -> Turn:
    return Turn(
        "refactorer",
        text,
        tools=tools,
        state=(("filesModified", modified),),
        emits=(("refactor:complete", {"filesModified": modified}),),
    )


RENAME_EDITS = (
    edit("src/api.ts", "export function getData()", "export function fetchData()"),
    edit(
        "src/handler.ts",
        "import { getData } from './api'; getData();",
        "import { fetchData } from './api'; fetchData();",
    ),
    edit("tests/api.test.ts", "import { getData }", "import { fetchData }"),
)
RENAME_PLAN = refactor_plan(["rename the definition", "update each import and call site"])
INTERFACE_TEXT = (
    "export interface {name} {{\n  getUser(id: string): Promise<User>;\n"
    "  updateUser(id: string, data: UserUpdate): Promise<User>;\n}}\n"
)


def extract_interface(name: str) -> tuple[Turn, ...]:
    return (
        analyzer(
            Tool("Read", {"file_path": "src/user-service.ts"}, "class UserService { ... }"),
            ["src/user-service.ts"],
        ),
        refactor_plan(["write the interface", "make UserService implement it"]),
        refactorer(
            f"Extracted {name} and made UserService implement it.",
            (
                Tool(
                    "Write",
                    {
                        "file_path": "src/user-service.interface.ts",
                        "content": INTERFACE_TEXT.format(name=name),
                    },
                    "File created",
                ),
                edit(
                    "src/user-service.ts",
                    "class UserService {",
                    f"class UserService implements {name} {{",
                ),
            ),
            2,
        ),
        verifier(12),
    )


MOVE_WRITE = Tool(
    "Write",
    {
        "file_path": "src/validators.ts",
        "content": "export function validateEmail(email: string) { ... }\n",
    },
    "File created",
)
MOVE_ANALYZER = analyzer(
    Tool(
        "Grep",
        {"pattern": "validateEmail", "path": "src"},
        "src/utils.ts:1:export function validateEmail(email: string) { ... }",
    ),
    ["src/utils.ts"],
)
MOVE_PLAN = refactor_plan(
    [
        "create src/validators.ts",
        "remove validateEmail from utils.ts",
        "re-export it from utils.ts for existing importers",
    ]
)

REFACTORING = Dataset(
    "refactoring",
    "refactoring-agent",
    ("analyzer", "planner", "refactorer", "verifier"),
    {
        "rename-function-across-files": {
            "task": "Rename function 'getData' to 'fetchData' across the codebase",
            "files": [
                {"path": "src/api.ts", "content": "export function getData() { ... }"},
                {
                    "path": "src/handler.ts",
                    "content": "import { getData } from './api'; getData();",
                },
                {"path": "tests/api.test.ts", "content": "import { getData } from '../src/api';"},
            ],
        },
        "extract-interface": {
            "task": "Extract an interface from the UserService class",
            "files": [
                {
                    "path": "src/user-service.ts",
                    "content": "class UserService {\n"
                    "  async getUser(id: string): Promise<User> { ... }\n"
                    "  async updateUser(id: string, data: UserUpdate): Promise<User> { ... }\n}\n",
                }
            ],
        },
        "move-to-separate-file": {
            "task": "Move the 'validateEmail' function to a new file called validators.ts",
            "files": [
                {
                    "path": "src/utils.ts",
                    "content": "export function validateEmail(email: string) { ... }\n"
                    "export function formatDate(date: Date) { ... }\n",
                }
            ],
        },
    },
    datetime(2026, 11, 20, 14, 0, tzinfo=UTC),
)

REFACTORING.runs.extend(
    [
        Run(
            "rf-rename-function-across-files-pass",
            "rename-function-across-files",
            (
                analyzer(RENAME_GREP, RENAME_FILES),
                RENAME_PLAN,
                refactorer("Renamed the definition and both references.", RENAME_EDITS, 3),
                verifier(3),
            ),
            RENAME_OUTPUT,
        ),
        Run(
            "rf-extract-interface-pass",
            "extract-interface",
            extract_interface("IUserService"),
            "Extracted `interface IUserService` (getUser, updateUser) into "
            "src/user-service.interface.ts; UserService now implements IUserService.",
        ),
        Run(
            "rf-move-to-separate-file-pass",
            "move-to-separate-file",
            (
                MOVE_ANALYZER,
                MOVE_PLAN,
                refactorer(
                    "Moved validateEmail to src/validators.ts and re-exported it from utils.ts.",
                    (
                        MOVE_WRITE,
                        edit(
                            "src/utils.ts",
                            "export function validateEmail(email: string) { ... }\n",
                            "export { validateEmail } from './validators';\n",
                        ),
                    ),
                    2,
                ),
                verifier(8),
            ),
            "Moved validateEmail into the new file src/validators.ts; src/utils.ts re-exports "
            "it so existing imports keep working. 2 files modified.",
        ),
        # ---- failing episodes --------------------------------------------------------------
        Run(
            "rf-rename-function-across-files-fail-early-count",
            "rename-function-across-files",
            (
                analyzer(
                    Tool(
                        "Grep",
                        {"pattern": "getData", "path": "src"},
                        "src/api.ts:1:export function getData() { ... }\n"
                        "src/handler.ts:1:import { getData } from './api'; getData();",
                    ),
                    RENAME_FILES[:2],
                ),
                RENAME_PLAN,
                Turn(
                    "refactorer",
                    "tsc reports tests/api.test.ts still imports getData; adding it to the "
                    "analysis.",
                    tools=(
                        *RENAME_EDITS[:2],
                        Tool(
                            "Bash",
                            {"command": "npx tsc --noEmit"},
                            "tests/api.test.ts(1,10): error TS2305: Module '../src/api' has "
                            "no exported member 'getData'.",
                            duration_ms=4100,
                        ),
                    ),
                    state=(("analysis", {"affectedFiles": 3, "files": RENAME_FILES}),),
                ),
                Turn(
                    "refactorer",
                    "Updated the test import too.",
                    tools=RENAME_EDITS[2:],
                    state=(("filesModified", 3),),
                    emits=(("refactor:complete", {"filesModified": 3}),),
                    resume=True,
                ),
                verifier(3),
            ),
            RENAME_OUTPUT,
            failing=(2,),
            why="The analysis grepped only src/ and reported 2 affected files at "
            "analysis:complete; the count was corrected to 3 later, but snapshot.at reads the "
            "state right after analysis:complete, so 'gte 3' fails.",
        ),
        Run(
            "rf-rename-function-across-files-fail-error-signal",
            "rename-function-across-files",
            (
                analyzer(RENAME_GREP, RENAME_FILES),
                RENAME_PLAN,
                Turn(
                    "refactorer",
                    "The edit of src/handler.ts failed; re-reading the file.",
                    tools=(
                        RENAME_EDITS[0],
                        edit(
                            "src/handler.ts",
                            'import { getData } from "./api";',
                            'import { fetchData } from "./api";',
                            error="old_string not found in src/handler.ts",
                        ),
                        RENAME_EDITS[2],
                    ),
                ),
                Turn(
                    "refactorer",
                    "Renamed the definition and both references.",
                    tools=(
                        Tool(
                            "Read",
                            {"file_path": "src/handler.ts"},
                            "import { getData } from './api'; getData();",
                        ),
                        RENAME_EDITS[1],
                    ),
                    state=(("filesModified", 3),),
                    emits=(("refactor:complete", {"filesModified": 3}),),
                    resume=True,
                ),
                verifier(3),
            ),
            RENAME_OUTPUT,
            failing=(0,),
            why="An Edit with a wrong old_string raised error:tool; the refactorer recovered "
            "and the rename is complete, but the default signal.not 'error:*' fails.",
        ),
        Run(
            "rf-extract-interface-fail-name",
            "extract-interface",
            extract_interface("UserServiceContract"),
            "Extracted `interface UserServiceContract` (getUser, updateUser) into "
            "src/user-service.interface.ts; UserService now implements it.",
            failing=(3,),
            why="The interface is named UserServiceContract, so the case-sensitive "
            "output.matches 'IUserService|UserServiceInterface' fails.",
        ),
        Run(
            "rf-move-to-separate-file-fail-no-edit",
            "move-to-separate-file",
            (
                MOVE_ANALYZER,
                MOVE_PLAN,
                refactorer("Created src/validators.ts with validateEmail.", (MOVE_WRITE,), 1),
                verifier(8),
            ),
            "Created src/validators.ts containing validateEmail.",
            failing=(4, 5),
            why="The function was copied into validators.ts but src/utils.ts was never edited: "
            "tool.called(Edit) fails and filesModified is 1 (< 2).",
        ),
    ]
)


# --------------------------------------------------------------------------------------
# Example 4: debugging (single debugger agent). No defaultAssertions.
# --------------------------------------------------------------------------------------

NULL_DIAGNOSIS = {
    "rootCause": "findUser returns null/undefined for an unknown id and getUserName "
    "reads user.name without a check",
    "category": "null-safety",
    "file": "src/user.ts",
    "line": 15,
}
NULL_READS = (
    Tool("Read", {"file_path": "tests/user.test.ts"}, "23: expect(getUserName('42'))..."),
    Tool("Read", {"file_path": "src/user.ts"}, "15:   return user.name;"),
)
NULL_FIX = edit("src/user.ts", "  return user.name;", "  return user?.name ?? 'unknown';")
NULL_OUTPUT = (
    "Root cause: getUserName dereferences the result of findUser, which is undefined for "
    "unknown ids. Fix: use optional chaining with a default (`user?.name ?? 'unknown'`) "
    "in src/user.ts line 15."
)


def diagnose(
    text: str, tools: tuple[Tool, ...], diagnosis: dict[str, JSON], *, resume: bool = False
) -> Turn:
    return Turn(
        "debugger",
        text,
        tools=tools,
        state=(("diagnosis", diagnosis),),
        emits=(("diagnosis:complete", {"category": diagnosis["category"]}),),
        resume=resume,
    )


def propose(text: str, tools: tuple[Tool, ...], *, resume: bool = True) -> Turn:
    files = [t.input["file_path"] for t in tools if t.name == "Edit"]
    return Turn(
        "debugger",
        text,
        tools=tools,
        state=(("fix", {"files": files}),),
        emits=(("fix:proposed", {"files": files}),),
        resume=resume,
    )


TIMEOUT_READ = Tool(
    "Read",
    {"file_path": "tests/api.test.ts"},
    "it('loads users', (done) => { fetchUsers().then(check); });",
)

DEBUGGING = Dataset(
    "debugging",
    "debugging-agent",
    ("debugger",),
    {
        "failing-test-null-error": {
            "error": "TypeError: Cannot read property 'name' of undefined\n"
            "at getUserName (src/user.ts:15)\n"
            "at Object.<anonymous> (tests/user.test.ts:23)\n",
            "testFile": "tests/user.test.ts",
            "sourceFile": "src/user.ts",
        },
        "test-timeout": {
            "error": "Timeout - Async callback was not invoked within 5000ms",
            "testFile": "tests/api.test.ts",
        },
        "import-error": {
            "error": "SyntaxError: The requested module './utils' does not provide an export "
            "named 'helper'\n",
        },
    },
    datetime(2026, 11, 20, 16, 0, tzinfo=UTC),
)

DEBUGGING.runs.extend(
    [
        Run(
            "dbg-failing-test-null-error-pass",
            "failing-test-null-error",
            (
                diagnose(
                    "user is undefined for unknown ids; user.name throws.",
                    NULL_READS,
                    NULL_DIAGNOSIS,
                ),
                propose("Guard the lookup with optional chaining.", (NULL_FIX,)),
            ),
            NULL_OUTPUT,
        ),
        Run(
            "dbg-test-timeout-pass",
            "test-timeout",
            (
                diagnose(
                    "The test takes `done` but never calls it; the promise is not awaited.",
                    (TIMEOUT_READ,),
                    {
                        "rootCause": "done callback never invoked; promise not awaited",
                        "category": "async",
                    },
                ),
                propose(
                    "Make the test async and await the promise.",
                    (
                        edit(
                            "tests/api.test.ts",
                            "it('loads users', (done) => { fetchUsers().then(check); });",
                            "it('loads users', async () => { check(await fetchUsers()); });",
                        ),
                    ),
                ),
            ),
            "The test declares a `done` callback but never calls it, so Jest waits 5000ms. "
            "Fix: make the test async and await the promise from fetchUsers().",
        ),
        Run(
            "dbg-import-error-pass",
            "import-error",
            (
                diagnose(
                    "utils.ts has a default export, not a named one.",
                    (
                        Tool(
                            "Grep",
                            {"pattern": "helper", "path": "src"},
                            "src/utils.ts:3:export default function helper() {\n"
                            "src/app.ts:1:import { helper } from './utils';",
                        ),
                    ),
                    {
                        "rootCause": "helper is a default export but imported as named",
                        "category": "imports",
                    },
                ),
                propose(
                    "Import the default export.",
                    (
                        edit(
                            "src/app.ts",
                            "import { helper } from './utils';",
                            "import helper from './utils';",
                        ),
                    ),
                ),
            ),
            "src/utils.ts exports `helper` as a default export, but src/app.ts imports it as "
            "a named export. Fix: `import helper from './utils';`.",
        ),
        # ---- failing episodes --------------------------------------------------------------
        Run(
            "dbg-failing-test-null-error-fail-edits-test",
            "failing-test-null-error",
            (
                diagnose(
                    "user is undefined for unknown ids; user.name throws.",
                    NULL_READS,
                    NULL_DIAGNOSIS,
                ),
                propose(
                    "Give the test a fixture user so the lookup succeeds.",
                    (
                        edit(
                            "tests/user.test.ts",
                            "expect(getUserName('42'))",
                            "await seedUser('42');\n  expect(getUserName('42'))",
                        ),
                    ),
                ),
            ),
            "Root cause: the test looks up id 42, for which findUser returns undefined. Fix: "
            "seed a user with id 42 in tests/user.test.ts before the assertion.",
            failing=(6,),
            why="The debugger diagnosed correctly but edited the test instead of the source: "
            "the only Edit targets tests/user.test.ts, so tool.calledWith(Edit, file_path "
            "endsWith user.ts) fails.",
        ),
        Run(
            "dbg-failing-test-null-error-fail-order",
            "failing-test-null-error",
            (
                propose(
                    "Guard the lookup with optional chaining.",
                    (*NULL_READS, NULL_FIX),
                    resume=False,
                ),
                diagnose(
                    "In hindsight: user is undefined for unknown ids.",
                    (),
                    NULL_DIAGNOSIS,
                    resume=True,
                ),
            ),
            NULL_OUTPUT,
            failing=(0,),
            why="fix:proposed is emitted before diagnosis:complete (patch first, diagnosis "
            "afterwards), so the ordered trajectory fails; the snapshot and tool assertions pass.",
        ),
        Run(
            "dbg-test-timeout-fail-category",
            "test-timeout",
            (
                diagnose(
                    "The API call is slow on CI.",
                    (TIMEOUT_READ,),
                    {
                        "rootCause": "real HTTP request is slower than 5000ms on CI",
                        "category": "network",
                    },
                ),
                propose(
                    "Mock the HTTP client.",
                    (
                        edit(
                            "tests/api.test.ts",
                            "it('loads users'",
                            "vi.mock('../src/http');\nit('loads users'",
                        ),
                    ),
                ),
            ),
            "The `done` callback only fires after a real HTTP request, which is slower than "
            "5000ms on CI. Fix: mock the HTTP client in tests/api.test.ts.",
            failing=(0,),
            why="The diagnosis blames the network: diagnosis.category is 'network' at "
            "diagnosis:complete instead of 'async'.",
        ),
        Run(
            "dbg-import-error-fail-no-grep",
            "import-error",
            (
                diagnose(
                    "utils.ts has a default export, not a named one.",
                    (
                        Tool(
                            "Read",
                            {"file_path": "src/utils.ts"},
                            "3: export default function helper() {",
                        ),
                    ),
                    {
                        "rootCause": "helper is a default export but imported as named",
                        "category": "imports",
                    },
                ),
                propose(
                    "Import the default export.",
                    (
                        edit(
                            "src/app.ts",
                            "import { helper } from './utils';",
                            "import helper from './utils';",
                        ),
                    ),
                ),
            ),
            "src/utils.ts exports `helper` as a default export, but src/app.ts imports it as "
            "a named export. Fix: `import helper from './utils';`.",
            failing=(1,),
            why="The debugger guessed the file and read it directly without searching, so "
            "tool.called(Grep) fails.",
        ),
    ]
)

DATASETS = (CODE_REVIEW, CODE_GENERATION, REFACTORING, DEBUGGING)


def main() -> None:
    expected = {dataset.directory: write(dataset) for dataset in DATASETS}
    (HERE / "expected.json").write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
