"""The command line imports what a command needs when it runs it.

`evalstream --help`, the help of every command, `check` on a recording and `score` on episode
files run in a fresh interpreter, which then lists the modules it imported: none of the Kafka
worker (faust, aiokafka), the judge's SDK (anthropic), Prometheus, the HTTP client or the
gateway may be among them. A module-level import of any of those in `evalstream.stream.cli`, a
command module or what they import fails here, whatever the machine's speed
(bench/startup_bench.py measures the time). The help printed by the lean process is also the
help rendered in this one, where the libraries are loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from evalstream.stream.cli import cli
from tests.scoring.episodes import make_episode

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "code-review"

# Loaded only by the commands that talk to Kafka, the judge, a store or serve HTTP.
NEVER_AT_START = (
    "faust",
    "mode",
    "aiokafka",
    "anthropic",
    "prometheus_client",
    "httpx",
    "fastapi",
    "uvicorn",
)
# Help needs click alone: neither the engine nor the models nor the libraries they use.
NOT_FOR_HELP = (
    *NEVER_AT_START,
    "pydantic",
    "yaml",
    "rich",
    "orjson",
    "jsonschema",
    "evalstream.assertions.evaluation.engine",
    "evalstream.assertions.suite_format.suites",
)

# Runs the console script's entry point, then writes the imported modules and the exit code.
PROBE = """
import json, os, sys
import click.formatting
from evalstream.stream.cli import main
sys.argv[0] = "evalstream"
click.formatting.FORCED_WIDTH = 80  # as in click's CliRunner
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
with open(os.environ["STARTUP_PROBE_OUT"], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""


def run_probe(tmp_path: Path, *args: str) -> tuple[int, set[str], subprocess.CompletedProcess[str]]:
    out = tmp_path / "probe.json"
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["STARTUP_PROBE_OUT"] = str(out)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.exists(), f"the probe did not finish: {done.stderr}"
    probe = json.loads(out.read_text())
    return probe["code"], set(probe["modules"]), done


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The given top-level packages or modules that were imported."""
    return sorted(n for n in names if n in modules)


def command_paths() -> Iterator[tuple[str, ...]]:
    """Every command and subcommand of `evalstream`, from the group itself."""

    def walk(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        yield path
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                yield from walk(sub, (*path, name))

    yield from walk(cli, ())


@pytest.mark.parametrize("path", list(command_paths()), ids=lambda p: " ".join(p) or "evalstream")
def test_help_loads_no_library_beyond_click(tmp_path: Path, path: tuple[str, ...]) -> None:
    code, modules, done = run_probe(tmp_path, *path, "--help")
    assert code == 0, done.stderr
    assert loaded(modules, NOT_FOR_HELP) == []
    # The same help as in this process, where the test suite has imported the libraries:
    # what a command offers does not depend on what happens to be loaded.
    here = CliRunner().invoke(cli, [*path, "--help"], prog_name="evalstream")
    assert here.exit_code == 0
    assert done.stdout == here.output
    assert done.stdout.startswith("Usage: evalstream")


def test_importing_the_cli_loads_no_library_beyond_click(tmp_path: Path) -> None:
    out = tmp_path / "modules.json"
    script = "import json, os, sys, evalstream.stream.cli\n" + (
        "json.dump(sorted(sys.modules), open(os.environ['STARTUP_PROBE_OUT'], 'w'))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "STARTUP_PROBE_OUT": str(out)}
    subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, check=True, timeout=120)
    modules = set(json.loads(out.read_text()))
    assert "evalstream.stream.cli" in modules
    assert loaded(modules, NOT_FOR_HELP) == []


def test_check_runs_without_kafka_judge_or_metrics(tmp_path: Path) -> None:
    code, modules, done = run_probe(
        tmp_path,
        "check",
        "-s",
        str(EXAMPLE / "suite.yaml"),
        str(EXAMPLE / "episodes.jsonl"),
        "-f",
        "json",
    )
    assert code in (0, 1), done.stderr  # 1: the example has failing episodes by design
    assert json.loads(done.stdout)["episodes"], "check evaluated nothing"
    assert "evalstream.assertions.evaluation.engine" in modules  # the probe saw a real evaluation
    assert loaded(modules, NEVER_AT_START) == []


def test_score_on_files_runs_without_kafka_judge_or_http(tmp_path: Path) -> None:
    episodes = tmp_path / "episodes.ndjson"
    episodes.write_text(
        "".join(json.dumps(make_episode(f"ep-{i}")) + "\n" for i in range(3)), encoding="utf-8"
    )
    code, modules, done = run_probe(tmp_path, "score", "--no-baseline", str(episodes))
    assert code == 0, done.stderr
    assert done.stdout.startswith("3/3 episodes passed"), done.stdout
    assert loaded(modules, NEVER_AT_START) == []
