"""`evalstream status / score / report / nightly` against a local episode store (episode-store
workflow)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.scoring.episodes import T0, make_episode
from tests.support_store import EpisodeStoreServer

Run = Callable[..., subprocess.CompletedProcess[str]]
JSON = Any


@pytest.fixture
def evalstream(tmp_path: Path) -> Run:
    """The installed console script, run from a scratch directory as a user would."""
    exe = Path(sys.executable).parent / "evalstream"
    assert exe.exists(), "the project is not installed in this environment (make install)"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(exe), *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )

    return run


@pytest.fixture(scope="module")
def server() -> Iterator[EpisodeStoreServer]:
    with EpisodeStoreServer() as running:
        yield running


@pytest.fixture
def store(server: EpisodeStoreServer) -> EpisodeStoreServer:
    server.episodes.clear()
    server.requests.clear()
    server.fail_page = {}
    server.page_failure = (503, {"Retry-After": "0"})
    return server


def steady(store: EpisodeStoreServer, n: int = 6, *, agent: str = "support-bot") -> None:
    for i in range(n):
        store.add(make_episode(f"{agent}-{i}", agent=agent, start=T0 + timedelta(minutes=i)))


def results(path: Path) -> dict[str, JSON]:
    obj: dict[str, JSON] = json.loads(path.read_text())
    return obj


def by_id(obj: dict[str, JSON]) -> dict[str, dict[str, JSON]]:
    return {e["episode_id"]: e for e in obj["episodes"]}


# --- status ---------------------------------------------------------------------------------


def test_status_reports_the_store(evalstream: Run, store: EpisodeStoreServer) -> None:
    steady(store, 3)
    proc = evalstream("status", "--store-url", store.url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        f"episode store {store.url}: ok (episode-store 0.3.0), 3 episodes stored"
    )


def test_status_of_a_store_that_is_down(evalstream: Run) -> None:
    proc = evalstream("status", "--store-url", "http://127.0.0.1:9", "--timeout", "2")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: cannot reach the episode store at http://127.0.0.1:9")
    assert "Traceback" not in proc.stderr


# --- score ----------------------------------------------------------------------------------


def test_score_against_the_rolling_baseline_flags_a_cost_rise(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    steady(store, 6)
    store.add(make_episode("pricey", start=T0 + timedelta(minutes=10), cost=0.03))
    steady(store, 6, agent="other-bot")
    proc = evalstream(
        "score", "--store-url", store.url, "--agent-id", "support-bot", "--output", "results.json"
    )
    assert proc.returncode == 1, proc.stderr  # a CRITICAL alert fails the episode
    obj = results(tmp_path / "results.json")
    assert obj["kind"] == "score-run"
    assert obj["baseline"]["mode"] == "rolling"
    assert obj["source"]["filters"]["agent_id"] == "support-bot"
    episodes = by_id(obj)
    assert set(episodes) == {f"support-bot-{i}" for i in range(6)} | {"pricey"}
    # The first five build the baseline (no self-comparison: they are unscored on cost).
    assert episodes["support-bot-0"]["scores"]["cost"] is None
    assert episodes["support-bot-0"]["scores"]["baseline"] is None
    assert episodes["support-bot-5"]["scores"]["cost_delta_pct"] == 0.0
    pricey = episodes["pricey"]
    assert pricey["scores"]["cost_delta_pct"] == 50.0
    assert pricey["scores"]["cost"] == 0.5
    assert pricey["scores"]["baseline"] == (
        "rolling(last 20) [agent_id=support-bot,case_id=refund]"
    )
    assert [(a["severity"], a["dimension"]) for a in pricey["alerts"]] == [("critical", "cost")]
    assert pricey["passed"] is False
    assert obj["summary"]["critical_episodes"] == 1
    assert "CRITICAL alerts: cost 1" in proc.stdout


def test_score_filters_by_model_and_limit(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    steady(store, 4)
    for i in range(3):
        store.add(
            make_episode(f"claude-{i}", model="claude-sonnet-4-5", start=T0 + timedelta(hours=1))
        )
    proc = evalstream(
        "score", "--store-url", store.url, "--model", "claude-sonnet-4-5", "--limit", "2",
        "--output", "r.json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert {e["model"] for e in results(tmp_path / "r.json")["episodes"]} == {"claude-sonnet-4-5"}
    assert len(results(tmp_path / "r.json")["episodes"]) == 2
    assert any("model=claude-sonnet-4-5" in r and "limit=2" in r for r in store.requests)


def baseline_file(path: Path, *, agent: str = "support-bot", cost: float = 0.02) -> Path:
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "source": "run:golden",
                "baselines": [
                    {
                        "key": {"agent_id": agent, "case_id": "refund"},
                        "cost_usd": cost,
                        "latency_ms": 4000.0,
                        "tool_names": ["search", "refund"],
                        "outcome": "success",
                        "step_count": 4,
                    }
                ],
            }
        )
    )
    return path


@pytest.mark.parametrize(
    "case",
    [
        (0.024, 4000.0, []),  # exactly +20 %: not an alert
        (0.028, 4000.0, [("warning", "cost")]),  # exactly +40 %: WARNING, not CRITICAL
        (0.02, 5200.0, []),  # exactly +30 % latency
        (0.02, 6400.0, [("warning", "latency")]),  # exactly +60 % latency
        (0.01, 2000.0, []),  # a cut is never penalised
    ],
)
def test_score_against_a_baseline_file_at_the_boundaries(
    evalstream: Run,
    store: EpisodeStoreServer,
    tmp_path: Path,
    case: tuple[float, float, list[tuple[str, str]]],
) -> None:
    cost, latency_ms, expected = case
    store.add(make_episode("e", cost=cost, latency_ms=latency_ms))
    base = baseline_file(tmp_path / "baseline.json")
    proc = evalstream("score", "--store-url", store.url, "--baseline", str(base), "-o", "r.json")
    assert proc.returncode == 0, proc.stderr  # WARNINGs do not fail an episode
    [episode] = results(tmp_path / "r.json")["episodes"]
    assert [(a["severity"], a["dimension"]) for a in episode["alerts"]] == expected
    assert episode["scores"]["baseline"] == "run:golden [agent_id=support-bot,case_id=refund]"
    assert episode["scores"]["tool_match"] == 1.0


def test_a_saved_baseline_scores_the_next_run(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    steady(store, 3)
    first = evalstream("score", "--store-url", store.url, "--save-baseline", "golden.json")
    assert first.returncode == 0, first.stderr
    saved = results(tmp_path / "golden.json")
    [entry] = saved["baselines"]
    assert entry["key"] == {"agent_id": "support-bot", "case_id": "refund"}
    assert (entry["cost_usd"], entry["episodes"]) == (0.02, 3)
    store.add(make_episode("next", start=T0 + timedelta(hours=1), cost=0.025))
    proc = evalstream(
        "score", "--store-url", store.url, "--baseline", "golden.json", "--since",
        "2026-01-01T00:30:00Z", "-o", "r.json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [episode] = results(tmp_path / "r.json")["episodes"]
    assert episode["scores"]["cost_delta_pct"] == 25.0
    assert [(a["severity"], a["dimension"]) for a in episode["alerts"]] == [("warning", "cost")]


def test_a_baseline_of_another_agent_is_an_error(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    steady(store, 2)
    base = baseline_file(tmp_path / "baseline.json", agent="other-bot")
    proc = evalstream("score", "--store-url", store.url, "--baseline", str(base), "-o", "r.json")
    assert proc.returncode == 2
    assert "the baselines describe agent(s) other-bot, not 'support-bot'" in proc.stderr
    obj = results(tmp_path / "r.json")
    assert [r["reason"] for r in obj["rejected"]] == ["baseline_mismatch"] * 2
    assert obj["episodes"] == []


def test_score_files_against_an_explicit_baseline_run(evalstream: Run, tmp_path: Path) -> None:
    episodes = [
        make_episode(f"base-{i}", run_id="golden", start=T0 + timedelta(minutes=i))
        for i in range(3)
    ]
    episodes.append(
        make_episode("candidate", run_id="nightly", tools=["search", "search", "search", "refund"])
    )
    path = tmp_path / "export.ndjson"
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    proc = evalstream("score", str(path), "--baseline-run", "golden", "-o", "r.json")
    assert proc.returncode == 0, proc.stderr
    obj = results(tmp_path / "r.json")
    assert obj["baseline"] == {"mode": "run", "detail": "run_id=golden"}
    [candidate] = obj["episodes"]  # the baseline run itself is not scored
    assert candidate["episode_id"] == "candidate"
    assert candidate["tool_calls"] == ["search", "search", "search", "refund"]
    # A retry storm: LCS 2 of 4 + 2 calls -> F1 = 2 * 2 / 6.
    assert candidate["scores"]["tool_match"] == pytest.approx(4 / 6)
    assert candidate["scores"]["baseline"] == "run:golden [agent_id=support-bot,case_id=refund]"


def export(tmp_path: Path, episodes: list[dict[str, JSON]], name: str = "export.ndjson") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    return str(path)


@pytest.mark.parametrize("baseline", [["--no-baseline"], []])  # none, or a rolling warm-up
def test_a_failure_without_baseline_or_suite_is_never_passed(
    evalstream: Run, tmp_path: Path, baseline: list[str]
) -> None:
    path = export(
        tmp_path,
        [
            make_episode("ok", start=T0),
            make_episode("broken", start=T0 + timedelta(minutes=1), status="failure"),
        ],
    )
    proc = evalstream("score", path, *baseline, "-o", "r.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    episodes = by_id(results(tmp_path / "r.json"))
    broken, ok = episodes["broken"], episodes["ok"]
    assert broken["outcome"] == "failure"
    assert broken["scores"]["correctness"] == 0.0
    assert broken["passed"] is False
    assert ("critical", "correctness") in [
        (a["severity"], a["dimension"]) for a in broken["alerts"]
    ]
    assert any("own outcome (failure)" in n for n in broken["scores"]["notes"])
    assert ok["scores"]["correctness"] == 1.0
    assert ok["passed"] is True


def test_run_is_an_alias_of_score(evalstream: Run, tmp_path: Path) -> None:
    path = export(tmp_path, [make_episode("ok", start=T0)])
    listed = evalstream("--help")
    assert "  run " in listed.stdout
    assert "Alias of `score`" in listed.stdout
    proc = evalstream("run", path, "--no-baseline", "-o", "r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert results(tmp_path / "r.json")["kind"] == "score-run"
    assert proc.stdout.startswith("1/1 episodes passed")


def test_filters_apply_to_files_too(evalstream: Run, tmp_path: Path) -> None:
    episodes = [
        make_episode(f"bot-{i}", start=T0 + timedelta(hours=i), case_id=None) for i in range(4)
    ]
    episodes.append(make_episode("other", agent="other-bot", case_id=None))
    episodes.append(make_episode("claude", model="claude-sonnet-4-5", case_id=None))
    path = tmp_path / "export.ndjson"
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))

    def scored(*args: str) -> list[str]:
        proc = evalstream("score", str(path), "--no-baseline", "-o", "r.json", *args)
        assert proc.returncode == 0, proc.stderr
        return sorted(e["episode_id"] for e in results(tmp_path / "r.json")["episodes"])

    assert len(scored()) == 6  # files: every episode unless --limit is given
    assert scored("--agent-id", "other-bot") == ["other"]
    assert scored("--model", "claude-sonnet-4-5") == ["claude"]
    assert scored("--since", "2026-01-01T02:00:00Z", "--agent-id", "support-bot") == [
        "bot-2",
        "bot-3",
    ]
    assert scored("--limit", "2") == ["bot-0", "bot-1"]


def test_a_baseline_run_that_does_not_exist(evalstream: Run, tmp_path: Path) -> None:
    path = tmp_path / "export.ndjson"
    path.write_text(json.dumps(make_episode("e")) + "\n")
    proc = evalstream("score", str(path), "--baseline-run", "golden")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: no episode of baseline run 'golden' found")


def test_suites_decide_correctness(evalstream: Run, tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: refunds\ndefaultAssertions:\n  - type: tool.called\n    name: refund\n")
    path = tmp_path / "episodes.json"
    path.write_text(
        json.dumps({"episodes": [make_episode("good"), make_episode("forgot", tools=["search"])]})
    )
    proc = evalstream("score", str(path), "--suite", str(suite), "--no-baseline", "-o", "r.json")
    assert proc.returncode == 1
    episodes = by_id(results(tmp_path / "r.json"))
    assert episodes["good"]["scores"]["correctness"] == 1.0
    assert episodes["good"]["assertions"] == {"pass": 1}
    assert episodes["forgot"]["scores"]["correctness"] == 0.0
    assert ("critical", "correctness") in [
        (a["severity"], a["dimension"]) for a in episodes["forgot"]["alerts"]
    ]
    # Without a baseline, cost, latency and tool match are unscored, never compared with
    # the episode itself.
    assert episodes["good"]["scores"]["cost"] is None
    assert episodes["good"]["scores"]["cost_delta_pct"] is None


def test_score_of_nothing_exits_two_and_names_the_cause(evalstream: Run, tmp_path: Path) -> None:
    empty = export(tmp_path, [], "empty.ndjson")
    proc = evalstream("score", empty, "--no-baseline")
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr == (
        "error: nothing was scored: the files hold no episode that passes the filters (an empty "
        "file?); pass --allow-empty if that is expected\n"
    )
    assert evalstream("score", empty, "--allow-empty").returncode == 0

    typo = tmp_path / "suite.yaml"
    typo.write_text(
        "name: refunds\nmatch: {agent_id: suport-bot}\n"
        "defaultAssertions:\n  - type: tool.called\n    name: refund\n"
    )
    path = export(
        tmp_path, [make_episode(f"e{i}", start=T0 + timedelta(minutes=i)) for i in range(3)]
    )
    proc = evalstream("score", path, "--suite", str(typo), "--no-baseline")
    assert proc.returncode == 2, proc.stdout
    assert (
        "nothing was evaluated: no assertion of the suites applied to any of the 3" in proc.stderr
    )
    assert "agent_id='support-bot'" in proc.stderr
    allowed = evalstream("run", path, "--suite", str(typo), "--no-baseline", "--allow-empty")
    assert allowed.returncode == 0, allowed.stderr


def bad_episodes() -> list[dict[str, JSON]]:
    negative = make_episode("negative-cost")
    negative["steps"][0]["cost_usd"] = -0.01
    text = make_episode("text-cost")
    text["steps"][0]["cost_usd"] = "0.01"
    unknown = make_episode("unknown-step")
    unknown["steps"][1]["step_type"] = "handoff"
    no_agent = make_episode("no-agent")
    del no_agent["agent_id"]
    return [negative, text, unknown, no_agent]


def test_bad_episodes_are_rejected_by_name_and_the_rest_scored(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    steady(store, 2)
    for episode in bad_episodes():
        store.put_raw(episode)
    proc = evalstream("score", "--store-url", store.url, "-o", "r.json")
    assert proc.returncode == 2
    obj = results(tmp_path / "r.json")
    assert sorted(e["episode_id"] for e in obj["episodes"]) == ["support-bot-0", "support-bot-1"]
    reasons = {r["where"].rsplit("/", 1)[-1]: r["reason"] for r in obj["rejected"]}
    assert reasons == {
        "negative-cost": "bad_cost",
        "text-cost": "bad_cost",
        "unknown-step": "unknown_step_type",
        "no-agent": "missing_field",
    }
    assert "'negative-cost' step 0: `cost_usd` must be a finite number >= 0, got -0.01" in (
        proc.stderr
    )
    assert "unknown `step_type` 'handoff'; valid: llm_call, tool_call" in proc.stderr


def test_unknown_steps_can_be_kept(evalstream: Run, tmp_path: Path) -> None:
    [_, _, unknown, _] = bad_episodes()
    path = tmp_path / "e.json"
    path.write_text(json.dumps(unknown))
    proc = evalstream("score", str(path), "--keep-unknown-steps", "-o", "r.json")
    assert proc.returncode == 0, proc.stderr
    assert [e["episode_id"] for e in results(tmp_path / "r.json")["episodes"]] == ["unknown-step"]


def test_running_episodes_are_skipped(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    steady(store, 1)
    store.add(make_episode("live", status="running"))
    proc = evalstream("score", "--store-url", store.url, "-o", "r.json")
    assert proc.returncode == 0, proc.stderr
    obj = results(tmp_path / "r.json")
    assert obj["skipped"] == [{"episode_id": "live", "reason": "still running"}]
    assert [e["episode_id"] for e in obj["episodes"]] == ["support-bot-0"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give either a store URL (--store-url) or episode files"),
        (["x.json", "--store-url", "http://127.0.0.1:9"], "give either a store URL"),
        (
            ["x.json", "--baseline", "b.json", "--no-baseline"],
            "--baseline and --no-baseline exclude",
        ),
        (["--store-url", "http://127.0.0.1:9", "--since", "yesterday"], "--since 'yesterday' is"),
    ],
)
def test_score_usage_errors(evalstream: Run, args: list[str], message: str) -> None:
    proc = evalstream("score", *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


# --- report ---------------------------------------------------------------------------------


def test_report_renders_markdown_and_json(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    steady(store, 6)
    store.add(make_episode("pricey", start=T0 + timedelta(minutes=10), cost=0.05))
    evalstream("score", "--store-url", store.url, "-o", "results.json")
    md = evalstream("report", "results.json")
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("# evalstream score run — ")
    assert "**6/7 episodes passed** — 1 with a CRITICAL alert" in md.stdout
    assert "| CRITICAL | cost | 1 |" in md.stdout
    # Failing episodes first.
    rows = [line for line in md.stdout.splitlines() if line.startswith("| pricey")]
    # Cost +150 % scores 0; the other dimensions are 1: overall 0.4 + 0.2 + 0.1 + 0.1.
    assert rows == [
        "| pricey | support-bot | success | **no** | 0.800 | 1.000 | +150.0 % | 1.000 | +0.0 % "
        "| 1.000 | CRITICAL cost |"
    ]
    as_json = evalstream("report", "results.json", "--format", "json")
    assert json.loads(as_json.stdout)["kind"] == "score-run"


def test_report_of_something_else(evalstream: Run, tmp_path: Path) -> None:
    (tmp_path / "check.json").write_text(json.dumps({"episodes": [], "summary": {}}))
    proc = evalstream("report", "check.json")
    assert proc.returncode == 2
    assert "`kind` is None, not 'score-run'" in proc.stderr


def test_score_reads_every_page_through_a_failing_one_and_shows_progress(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    steady(store, 1200)
    store.fail_page = {500: 1}  # the second page answers 503 once
    proc = evalstream(
        "score", "--store-url", store.url, "--limit", "1200", "--progress", "--output", "r.json"
    )
    assert proc.returncode in (0, 1), proc.stderr
    ids = {e["episode_id"] for e in results(tmp_path / "r.json")["episodes"]}
    assert ids == set(store.episodes)
    assert "store: retrying the page at offset 500: " in proc.stderr
    assert "HTTP 503" in proc.stderr
    progress = [line for line in proc.stderr.splitlines() if line.startswith("store: 1")]
    assert progress[-1] == "store: 1200 episodes read, 3 pages, 1 retried"
    assert sum("offset=500" in r for r in store.requests) == 2


def test_score_against_a_store_that_keeps_failing_names_the_page(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    steady(store, 1200)
    store.fail_page = {500: 99}
    proc = evalstream("score", "--store-url", store.url, "--limit", "1200")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the list page at offset 500 (limit 500) failed 5 times" in proc.stderr
    assert "HTTP 503" in proc.stderr
    assert "evalstream status" in proc.stderr
    # No progress unless asked or on a terminal.
    assert not any(line.startswith("store: ") for line in proc.stderr.splitlines())
    assert sum("offset=500" in r for r in store.requests) == 5


# --- nightly --------------------------------------------------------------------------------


def test_nightly_scores_the_last_day_and_fails_on_critical(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    for i in range(6):
        store.add(make_episode(f"day-{i}", start=now - timedelta(hours=6, minutes=-i)))
    store.add(make_episode("old-pricey", start=now - timedelta(days=3), cost=0.5))
    proc = evalstream("nightly", "--store-url", store.url, "--since", "24h", "--out-dir", "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [json_report] = sorted((tmp_path / "out").glob("score-*.json"))
    assert json_report.with_suffix(".md").exists()
    obj = results(json_report)
    assert sorted(by_id(obj)) == [f"day-{i}" for i in range(6)]  # the old one is outside 24h

    store.add(make_episode("pricey", start=now - timedelta(hours=1), cost=0.05))
    config = tmp_path / "nightly.yaml"
    config.write_text(f"store_url: {store.url}\nsince: 24h\nout_dir: out2\n")
    proc = evalstream("nightly", "--config", str(config))
    assert proc.returncode == 1
    assert "CRITICAL alerts: cost 1" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("reports: out2/score-")


def test_nightly_run_twice_with_a_baseline_state_gives_the_same_answer(
    evalstream: Run, store: EpisodeStoreServer, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    for i in range(5):
        store.add(make_episode(f"day-{i}", start=now - timedelta(hours=6, minutes=-i)))
    store.add(make_episode("pricey", start=now - timedelta(hours=1), cost=0.05))
    args = ("nightly", "--store-url", store.url, "--baseline-state", "state.json")
    first = evalstream(*args, "--out-dir", "a")
    second = evalstream(*args, "--out-dir", "b")
    assert first.returncode == second.returncode == 1, first.stdout + second.stdout
    assert first.stdout.splitlines()[:-1] == second.stdout.splitlines()[:-1]  # all but paths
    [a], [b] = sorted((tmp_path / "a").glob("*.json")), sorted((tmp_path / "b").glob("*.json"))
    assert results(a)["episodes"] == results(b)["episodes"]
    [key] = results(tmp_path / "state.json")["current"]["keys"]
    assert len(key["entries"]) == 6
