#!/usr/bin/env python3
"""A fingerprint of what scoring decides on the scoring benchmark's episodes.

    .venv/bin/python bench/scoring_fingerprint.py [--episodes 10000]

Scores the 40,000 episodes of `bench/scoring_bench.py` (10 and 50 steps, steady and
all-regressed traffic) against the fixed baselines and against a rolling baseline, and
prints the SHA-256 of the sorted-key JSON of every score record (`EpisodeScores.to_json()`),
its alerts (`EpisodeAlert.to_json()`) and its pass flag, per workload and in total. A speed-up
of the scoring hot path must leave every hash unchanged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence

from evalstream.assertions.alerting.alert_rules import AlertRules, episode_passes
from evalstream.assertions.scores.baselines import RollingBaselines
from evalstream.assertions.scores.dimensions import ScoringConfig, score_episode

sys.path.insert(0, __file__.rsplit("/", 1)[0])  # bench/ is not a package
from scoring_bench import Workload, make_workload


def _line(scores: object, alerts: list[object], passed: bool) -> bytes:
    record = {
        "scores": scores,
        "alerts": alerts,
        "passed": passed,
    }
    return json.dumps(record, sort_keys=True).encode() + b"\n"


def fingerprint(work: Workload, *, rolling: bool) -> str:
    """SHA-256 of the records, alerts and pass flags of one workload, in episode order."""
    config, rules = ScoringConfig(), AlertRules()
    store = RollingBaselines(20) if rolling else work.baselines
    digest = hashlib.sha256()
    for inp in work.inputs:
        scores = score_episode(inp, store.get(store.key_for(inp.attrs)), config)
        store.observe(inp)
        alerts = rules.evaluate(scores)
        passed = episode_passes(None, alerts)
        digest.update(_line(scores.to_json(), [a.to_json() for a in alerts], passed))
    return digest.hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    args = parser.parse_args(argv)
    total = hashlib.sha256()
    for steps in (10, 50):
        for traffic, share in (("steady", 0.05), ("all-regressed", 1.0)):
            work = make_workload(args.episodes, steps, regressed=share)
            for rolling in (False, True):
                value = fingerprint(work, rolling=rolling)
                total.update(value.encode())
                kind = "rolling" if rolling else "fixed"
                print(f"{steps:>2} steps {traffic:<13} {kind:<7} {value}")
    print(f"total {total.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
