"""A scoring run over finished episodes: evaluate, score against a baseline, alert (episode-store
workflow).

Pure: no I/O and no clock (the caller passes `created_at` and event times). The same stages as
the pipeline — assembly, the incremental engine, `score_episode`, `AlertRules`, and
optionally the windowed `RegressionDetector` — over complete episodes given one at a time:

    scorer = Scorer(suite_set, baselines=RollingBaselines(20))
    closed = scorer.evaluate(signals)            # one episode's signals; resolve judgements
    scored = scorer.score(closed)                # scores, alerts, windowed events
    # or, with a result computed without signals:  scorer.score_result(result, tool_names)
    run = scorer.run(created_at=..., source=..., baseline=...)   # the `score-run` record

Feed episodes in start order: a rolling baseline is causal (an episode is never part of its
own baseline) and the windowed detector runs on event time (each episode's end).

The run's JSON (`ScoreRun.to_json`) is the results file of `evalstream score`, marked
`"kind": "score-run"`; `evalstream.assertions.reports.score_report` renders it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from evalstream.assertions.alerting.alert_rules import (
    AlertRules,
    EpisodeAlert,
    Severity,
    episode_passes,
    quality_passes,
)
from evalstream.assertions.alerting.regression import AlertEvent, Observation, RegressionDetector
from evalstream.assertions.errors import InputError
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.evaluation.verdicts import Verdict
from evalstream.assertions.scores.baselines import BaselineStore, FileBaselines
from evalstream.assertions.scores.dimensions import (
    DIMENSIONS,
    BaselineMismatchError,
    EpisodeScores,
    ScoringConfig,
    ScoringInput,
    score_episode,
)
from evalstream.assertions.wire.pricing import PricingTable, default_pricing
from evalstream.assertions.wire.signals import Signal

# Evaluating signals needs the assertion engine, which takes a good part of start-up to
# import; scoring results computed without signals does not.
if TYPE_CHECKING:
    from evalstream.assertions.evaluation.assembly import ClosedEpisode, CloseRules
    from evalstream.assertions.suite_format.suites import SuiteSet

JSON = Any
KIND = "score-run"
VERSION = 1
SCORE_NAMES = ("overall", *DIMENSIONS)


Place = tuple[float, str]  # an episode's start and id: its place in a run's scoring order


class ScoreRunError(InputError):
    """A scoring run cannot go on as asked, or a results file is not a score run."""


@dataclass(frozen=True, slots=True)
class ScoredEpisode:
    """One episode's scores and alerts, with what they were computed from."""

    inp: ScoringInput
    scores: EpisodeScores
    alerts: tuple[EpisodeAlert, ...]
    passed: bool
    assertions: Mapping[str, int]  # verdict -> count
    close_reason: str
    started_ts: float | None
    ended_ts: float | None

    def to_json(self) -> dict[str, JSON]:
        attrs = self.inp.attrs
        return {
            "episode_id": self.inp.episode_id,
            "agent_id": attrs.get("agent_id"),
            "model": attrs.get("model"),
            "case_id": attrs.get("case_id"),
            "variant": attrs.get("variant"),
            "run_id": attrs.get("run_id"),
            "outcome": self.inp.outcome,
            "close_reason": self.close_reason,
            "passed": self.passed,
            "assertions": dict(self.assertions),
            "cost_usd": self.inp.cost_usd if self.inp.cost_complete else None,
            "latency_ms": self.inp.latency_ms,
            "step_count": self.inp.step_count,
            "tool_calls": list(self.inp.tool_names),
            "started_ts": self.started_ts,
            "ended_ts": self.ended_ts,
            "scores": self.scores.to_json(),
            "alerts": [a.to_json() for a in self.alerts],
        }


@dataclass(frozen=True, slots=True)
class Rejected:
    """Input that could not be scored: where it was, a stable reason code, the message."""

    where: str
    reason: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "reason": self.reason, "message": self.message}


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def summarise(
    episodes: Sequence[ScoredEpisode],
    regressions: Sequence[AlertEvent],
    rejected: Sequence[Rejected],
    skipped: Sequence[Mapping[str, str]],
) -> dict[str, JSON]:
    """Counts, mean scores (over the episodes where a score exists) and alerts by severity."""
    means: dict[str, float | None] = {}
    for name in SCORE_NAMES:
        values = [v for e in episodes if (v := e.scores.dimension(name)) is not None]
        means[name] = _mean(values)
    alerts: dict[str, dict[str, int]] = {s.value: {} for s in Severity}
    for e in episodes:
        for a in e.alerts:
            by_dim = alerts[a.severity.value]
            by_dim[a.dimension] = by_dim.get(a.dimension, 0) + 1
    critical_episodes = sum(
        1 for e in episodes if any(a.severity is Severity.CRITICAL for a in e.alerts)
    )
    firing_critical = sum(
        1 for r in regressions if r.state.value != "resolved" and r.severity is Severity.CRITICAL
    )
    return {
        "episodes": len(episodes),
        "passed": sum(1 for e in episodes if e.passed),
        "failed": sum(1 for e in episodes if not e.passed),
        "critical_episodes": critical_episodes,
        "warning_episodes": sum(
            1
            for e in episodes
            if e.alerts and all(a.severity is Severity.WARNING for a in e.alerts)
        ),
        "without_baseline": sum(1 for e in episodes if e.scores.baseline is None),
        "mean_scores": means,
        "alerts": alerts,
        "regression_events": len(regressions),
        "critical_regressions": firing_critical,
        "rejected": len(rejected),
        "skipped": len(skipped),
    }


class EpisodeTally(Protocol):
    """What a run whose episodes were streamed out keeps of them (`run_tally.RunTally`)."""

    @property
    def episodes(self) -> int: ...

    @property
    def failed(self) -> int: ...

    @property
    def evaluated(self) -> int: ...

    @property
    def first_attrs(self) -> Mapping[str, JSON] | None: ...

    def listed_records(self) -> list[dict[str, JSON]] | None: ...

    def summary(
        self,
        regressions: Sequence[AlertEvent],
        rejected: Sequence[Rejected],
        skipped: Sequence[Mapping[str, str]],
    ) -> dict[str, JSON]: ...


def _critical(summary: Mapping[str, JSON]) -> bool:
    return bool(summary["critical_episodes"] or summary["critical_regressions"])


@dataclass
class ScoreRun:
    """The record of one scoring run (the `score-run` results file)."""

    created_at: str
    source: Mapping[str, JSON]
    baseline: Mapping[str, JSON]
    episodes: list[ScoredEpisode] = field(default_factory=list)
    regressions: list[AlertEvent] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    config: Mapping[str, JSON] = field(default_factory=dict)
    # Each episode's record already rendered for the results file (`score_run_json`), in
    # `episodes` order, when whoever scored them rendered them as they went.
    rendered_episodes: Iterable[bytes] | None = field(default=None, repr=False, compare=False)
    # A run whose episodes were streamed out as they were scored: `episodes` is empty, this
    # counts them, and `rendered_episodes` (read once) holds their records when rendered.
    tally: EpisodeTally | None = field(default=None, repr=False, compare=False)

    def summary(self) -> dict[str, JSON]:
        """The results file's `summary`, without rendering every episode's record."""
        if self.tally is not None:
            return self.tally.summary(self.regressions, self.rejected, self.skipped)
        return summarise(self.episodes, self.regressions, self.rejected, self.skipped)

    @property
    def episode_count(self) -> int:
        return self.tally.episodes if self.tally is not None else len(self.episodes)

    @property
    def evaluated_count(self) -> int:
        """How many episodes a suite's assertion applied to."""
        if self.tally is not None:
            return self.tally.evaluated
        return sum(1 for e in self.episodes if e.assertions)

    @property
    def first_attrs(self) -> Mapping[str, JSON] | None:
        """The attributes of the run's first scored episode (None: none was scored)."""
        if self.tally is not None:
            return self.tally.first_attrs
        return self.episodes[0].inp.attrs if self.episodes else None

    @property
    def critical(self) -> bool:
        """Whether any episode raised a CRITICAL alert or a CRITICAL regression fired."""
        return _critical(self.summary())

    def exit_code(self, summary: Mapping[str, JSON] | None = None) -> int:
        """0 every episode passed; 1 an episode failed (CRITICAL alert, failed assertion) or
        a CRITICAL regression fired; 2 input that could not be scored. `summary`: this
        run's `summary()` when the caller has it already (it walks every episode)."""
        if self.rejected:
            return 2
        if self.tally is not None:
            failed = self.tally.failed > 0
        else:
            failed = any(not e.passed for e in self.episodes)
        if failed or _critical(summary or self.summary()):
            return 1
        return 0

    def to_json(
        self, summary: Mapping[str, JSON] | None = None, *, episodes: bool = True
    ) -> dict[str, JSON]:
        """The results file's record; `summary` when the caller has it already, and
        `episodes=False` leaves the episodes' list empty (`score_run_json` fills it in)."""
        if episodes and self.tally is not None and self.tally.episodes:
            raise ScoreRunError("the run's episodes were streamed out: see rendered_episodes")
        return {
            "kind": KIND,
            "version": VERSION,
            "created_at": self.created_at,
            "source": dict(self.source),
            "baseline": dict(self.baseline),
            "config": dict(self.config),
            "summary": dict(summary) if summary is not None else self.summary(),
            "episodes": [e.to_json() for e in self.episodes] if episodes else [],
            "regressions": [r.to_json() for r in self.regressions],
            "rejected": [r.to_json() for r in self.rejected],
            "skipped": list(self.skipped),
        }


def baselines_of(run: ScoreRun, source: str) -> FileBaselines:
    """Fixed baselines summarising a run's scored episodes per key (medians, modal tools),
    to score later runs against (`evalstream score --save-baseline`)."""
    if run.tally is not None:
        raise ScoreRunError("the run's episodes were streamed out: nothing to make a baseline of")
    if not run.episodes:
        raise ScoreRunError("no episode was scored: there is nothing to make a baseline of")
    return FileBaselines.from_results([e.inp for e in run.episodes], source=source)


def check_score_run(obj: JSON, where: str = "results") -> Mapping[str, JSON]:
    """`obj` as a score-run record, or ScoreRunError naming what it is instead."""
    if not isinstance(obj, Mapping):
        raise ScoreRunError(
            f"{where}: a results file holds a JSON object, got {type(obj).__name__}"
        )
    kind = obj.get("kind")
    if kind != KIND:
        raise ScoreRunError(
            f"{where}: `kind` is {kind!r}, not {KIND!r}: not the output of `evalstream score`"
        )
    version = obj.get("version")
    if version != VERSION:
        raise ScoreRunError(f"{where}: score-run version {version!r} is not supported (only 1)")
    for key, kind_of in (("summary", Mapping), ("episodes", list)):
        if not isinstance(obj.get(key), kind_of):
            raise ScoreRunError(f"{where}: a score run needs `{key}`")
    return obj


class Scorer:
    """Evaluates, scores and alerts on complete episodes (see the module docstring).

    `baselines` None scores without a baseline (cost, latency and tool match unscored).
    With `require_agent_baseline`, a fixed baseline store that has no baseline at all for an
    episode's agent is an error (a baseline of another agent); otherwise such an episode is
    scored without one and says so in its notes.
    """

    def __init__(
        self,
        suite_set: SuiteSet | None = None,
        *,
        baselines: BaselineStore | None = None,
        config: ScoringConfig | None = None,
        rules: AlertRules | None = None,
        detector: RegressionDetector | None = None,
        pricing: PricingTable | None = None,
        close_rules: CloseRules | None = None,
        require_agent_baseline: bool = False,
    ) -> None:
        self.pricing = pricing or default_pricing()
        self._suite_set = suite_set
        self.baselines = baselines
        self.config = config or ScoringConfig()
        self.rules = rules or AlertRules()
        self.detector = detector
        self._close_rules = close_rules
        self.require_agent_baseline = require_agent_baseline
        self.keep_scored = True  # False: the caller takes each scored episode as returned
        self.episodes: list[ScoredEpisode] = []
        self.regressions: list[AlertEvent] = []
        self.rejected: list[Rejected] = []
        self.skipped: list[dict[str, str]] = []
        self._baseline_agents: frozenset[str] | None = None
        self.set_baseline_agents()

    def set_baseline_agents(self) -> None:
        """Note which agents a fixed baseline store describes (after replacing `baselines`)."""
        self._baseline_agents = None
        store = self.baselines
        if not self.require_agent_baseline or store is None or "agent_id" not in store.key_attrs:
            return
        listed = getattr(store, "baselines", None)  # fixed stores list theirs; rolling do not
        if callable(listed):
            self._baseline_agents = frozenset(
                str(dict(b.key.items).get("agent_id")) for b in listed()
            )

    @property
    def suite_set(self) -> SuiteSet:
        if self._suite_set is None:
            from evalstream.assertions.suite_format.suites import SuiteSet  # noqa: PLC0415

            self._suite_set = SuiteSet([])
        return self._suite_set

    @property
    def has_suites(self) -> bool:
        """Whether any suite was given (without one, no assertion needs an episode's signals)."""
        return self._suite_set is not None and bool(self._suite_set.suites)

    def evaluate(self, signals: Sequence[Signal]) -> ClosedEpisode:
        """Run one complete episode's signals through assembly and the engine; the caller
        resolves `closed.pending` judgements before `score`."""
        if not signals:
            raise ScoreRunError("an episode needs at least one signal")
        from evalstream.assertions.evaluation.assembly import (  # noqa: PLC0415
            CloseRules,
            EpisodeAssembler,
        )

        if self._close_rules is None:
            self._close_rules = CloseRules()
        assembler = EpisodeAssembler(
            self.suite_set.plan_for, self._close_rules, self.pricing, selection=self.suite_set
        )
        for sig in signals:
            assembler.feed(sig, sig.ts)
        assembler.flush()
        closed = assembler.drain_ready()
        if len(closed) != 1:
            ids = sorted({s.episode_id for s in signals})
            raise ScoreRunError(f"expected the signals of one episode, got {len(closed)}: {ids}")
        return closed[0]

    def score(self, closed: ClosedEpisode) -> ScoredEpisode:
        return self.score_result(closed.result(), closed.evaluation.facts.tool_names())

    def score_result(self, result: EpisodeResult, tool_names: Sequence[str]) -> ScoredEpisode:
        """`score` of an episode's result and its tool-call names, however they were computed
        (a closed episode's `result()` and facts, or a codec that computes them directly)."""
        inp = ScoringInput.from_result(result, tool_names)
        baseline = None
        if self.baselines is not None:
            agent = inp.attrs.get("agent_id")
            if self._baseline_agents is not None and str(agent) not in self._baseline_agents:
                raise BaselineMismatchError(
                    f"episode {inp.episode_id!r}: the baselines describe agent(s) "
                    f"{', '.join(sorted(self._baseline_agents))}, not {agent!r}; pass a "
                    "baseline of this agent, or a rolling baseline"
                )
            baseline = self.baselines.baseline_for(inp.attrs)
        scores = score_episode(inp, baseline, self.config)
        alerts = tuple(self.rules.evaluate(scores))
        passed = episode_passes(result.passed, alerts)
        counts: dict[str, int] = {}
        for outcome in result.assertions:
            counts[outcome.verdict.value] = counts.get(outcome.verdict.value, 0) + 1
        scored = ScoredEpisode(
            inp=inp,
            scores=scores,
            alerts=alerts,
            passed=passed,
            assertions={v.value: counts.get(v.value, 0) for v in Verdict if v.value in counts},
            close_reason=result.close_reason,
            started_ts=result.started_ts,
            ended_ts=result.ended_ts,
        )
        observation = Observation.from_scores(
            inp,
            scores,
            quality_passes(result.passed, alerts),
            warmup=self.baselines is not None and baseline is None,
        )
        if self.detector is not None:
            now = result.ended_ts if result.ended_ts is not None else 0.0
            self.regressions.extend(self.detector.observe(observation, now))
        # After scoring (an episode is never its own baseline), and not while its stream's
        # regression fires: a rolling baseline must not learn the regressed episodes.
        if self.baselines is not None and not (
            self.detector is not None
            and self.detector.holding(observation.agent_id, observation.variant)
        ):
            self.baselines.observe(inp)
        if self.keep_scored:
            self.episodes.append(scored)
        return scored

    def reject(self, where: str, reason: str, message: str) -> None:
        self.rejected.append(Rejected(where, reason, message))

    def skip(self, episode_id: str, reason: str) -> None:
        self.skipped.append({"episode_id": episode_id, "reason": reason})

    def run(
        self,
        *,
        created_at: str,
        source: Mapping[str, JSON],
        baseline: Mapping[str, JSON],
    ) -> ScoreRun:
        return ScoreRun(
            created_at=created_at,
            source=source,
            baseline=baseline,
            episodes=list(self.episodes),
            regressions=list(self.regressions),
            rejected=list(self.rejected),
            skipped=list(self.skipped),
            config={
                "weights": self.config.weights.as_dict(),
                "alert_rules": self.rules.model_dump(),
            },
        )
