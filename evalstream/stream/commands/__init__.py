"""Command groups beyond the core ones in `evalstream.stream.cli`, one module per capability.

Each module exposes `register(group)`, which adds its commands to the `evalstream` group.
Keeping them apart lets `evalstream/stream/cli.py` stay small and each capability own its options.
`evalstream --help` imports every one of them, so each imports only click and light
declarations at module level and leaves the rest to its handlers (tests/cli/test_startup.py).
"""

from __future__ import annotations

from importlib import import_module

import click

COMMAND_MODULES = (
    "evalstream.stream.commands.scoring",  # status, score, report, nightly (episode-store workflow)
    "evalstream.stream.commands.gateway",  # gateway
    "evalstream.stream.commands.evals",  # eval, matrix, compare
    "evalstream.stream.commands.review",  # review (human grading queue)
    "evalstream.stream.commands.harness",  # harness run / report (eval-harness suites as a CI gate)
    "evalstream.stream.commands.replay",  # record, replay
    "evalstream.stream.commands.episode",  # episode (drill-down of one episode id)
)


def register_all(group: click.Group) -> None:
    for name in COMMAND_MODULES:
        import_module(name).register(group)
