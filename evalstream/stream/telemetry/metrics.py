"""Prometheus metrics of the pipeline, on an injected registry (no process globals).

Units are seconds; label sets are bounded (suite, assertion type, verdict, reason, topic,
partition) — never an episode id. The per-episode families (closed episodes, verdicts, lead
times, scores, baseline deltas, per-episode alerts) name the latest episode of each series
(bucket) in an OpenMetrics exemplar instead (`evalstream/stream/telemetry/exemplars.py`).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.process_collector import ProcessCollector

from evalstream.stream.telemetry.fast_metrics import LabelledCounter, LabelledHistogram

LEAD_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
DELTA_BUCKETS = (-50, -20, -10, 0, 10, 20, 30, 40, 60, 100, 200)
LATENCY_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


EPISODE_ERROR_STAGES = ("evaluate", "report", "early_verdict", "input")


class PipelineMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        if process:
            ProcessCollector(registry=r)  # process_resident_memory_bytes and friends
        self.signals = Counter(
            "evalstream_signals_consumed", "Signals read from a source.", ["source"], registry=r
        )
        self.rejected = Counter(
            "evalstream_signals_rejected",
            "Input sent to the dead-letter sink.",
            ["reason"],
            registry=r,
        )
        self.dead_letter_failures = Counter(
            "evalstream_dead_letter_failures",
            "Dead letters the broker or producer refused, given up (logged), by reason.",
            ["reason"],
            registry=r,
        )
        self.duplicates = Counter(
            "evalstream_duplicate_signals",
            "Signals dropped as duplicates of one already seen.",
            registry=r,
        )
        self.late = Counter(
            "evalstream_late_signals", "Signals for an episode that had already closed.", registry=r
        )
        self.episode_errors = Counter(
            "evalstream_episode_errors",
            "Episodes whose evaluation (feeding, closing) or report raised; each is reported "
            "with outcome error and the others go on. stage: evaluate | report | early_verdict "
            "| input (a signal that no episode could take).",
            ["stage"],
            registry=r,
        )
        for stage in EPISODE_ERROR_STAGES:
            self.episode_errors.labels(stage)
        self.open_episodes = Gauge(
            "evalstream_open_episodes", "Episodes currently open.", registry=r
        )
        # Updated per closed episode, many times each: lock-free families (fast_metrics).
        self.episodes = LabelledCounter(
            "evalstream_episodes_closed",
            "Closed episodes by close reason and outcome.",
            ["reason", "outcome"],
            r,
        )
        self.verdicts = LabelledCounter(
            "evalstream_verdicts",
            "Assertion verdicts by suite, type and verdict; early=true when decided before close.",
            ["suite", "type", "verdict", "early"],
            r,
        )
        self.lead_time = LabelledHistogram(
            "evalstream_early_verdict_lead_seconds",
            "How long before its episode's last signal (event time) an early verdict was decided.",
            ["type"],
            LEAD_BUCKETS,
            r,
        )
        self.evaluation_latency = Histogram(
            "evalstream_evaluation_latency_seconds",
            "Wall time to process one batch of signals (decode, assemble, evaluate, emit).",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.verdict_delay = Histogram(
            "evalstream_verdict_delay_seconds",
            "Wall clock at emission minus the deciding signal's event time.",
            buckets=(*LATENCY_BUCKETS, 10, 30, 60),
            registry=r,
        )
        self.consumer_lag = Gauge(
            "evalstream_consumer_lag",
            "Messages between the committed position and the end of each source partition.",
            ["topic", "partition"],
            registry=r,
        )
        # Scoring and regression alerts. Agent and variant values go through `agent_labels`,
        # one cap per registry (not per pipeline), so a flood of agent ids cannot blow up the
        # series count.
        self.agent_labels = BoundedLabels()
        self.scores = LabelledHistogram(
            "evalstream_episode_score",
            "Scores of closed episodes per dimension (correctness, cost, tool_match, latency, "
            "safety, overall), in [0, 1].",
            ["dimension", "agent", "variant"],
            SCORE_BUCKETS,
            r,
        )
        self.baseline_delta = LabelledHistogram(
            "evalstream_baseline_delta_percent",
            "Signed change against the baseline, in percent (dimension = cost or latency).",
            ["dimension", "agent", "variant"],
            DELTA_BUCKETS,
            r,
        )
        self.episode_alerts = LabelledCounter(
            "evalstream_episode_alerts",
            "Per-episode alert rules that fired, by severity, dimension, agent and variant.",
            ["severity", "dimension", "agent", "variant"],
            r,
        )
        self.alerts_firing = Gauge(
            "evalstream_regression_alerts_firing",
            "Windowed regression alerts currently firing, by severity, dimension, agent and "
            "variant.",
            ["severity", "dimension", "agent", "variant"],
            registry=r,
        )
        self.alert_sink_failures = Counter(
            "evalstream_alert_sink_failures",
            "Alert deliveries that failed after their retries, by sink.",
            ["sink"],
            registry=r,
        )
        self.otlp_export_events = Counter(
            "evalstream_otlp_export_events",
            "Evaluation events exported over OTLP, by OTLP signal (logs, traces) and outcome: "
            "sent, dropped (queue full or closing), failed (refused, or retries exhausted).",
            ["signal", "outcome"],
            registry=r,
        )
        self.otlp_export_retries = Counter(
            "evalstream_otlp_export_retries",
            "OTLP export requests retried after a connection error, a timeout, 429 or 5xx.",
            registry=r,
        )
        self.judge_calls = Counter(
            "evalstream_judge_calls",
            "LLM judge questions by outcome (ok, error, cached, budget_exhausted).",
            ["outcome"],
            registry=r,
        )
        self.judge_spend = Counter(
            "evalstream_judge_spend_usd",
            "What the LLM judge spent, in US dollars: the usage the API reported (input, "
            "output, cache reads and writes) priced by the pricing table.",
            registry=r,
        )
        self.judge_cache_tokens = Counter(
            "evalstream_judge_cache_tokens",
            "Prompt-cache tokens of LLM judge calls, by kind (read, write).",
            ["kind"],
            registry=r,
        )
        self.judge_cache_saving = Counter(
            "evalstream_judge_cache_saving_usd",
            "US dollars the prompt cache saved the LLM judge (cache reads at the input price "
            "minus their cost, less the cache-write surcharge).",
            registry=r,
        )
        self.judge_budget_remaining = Gauge(
            "evalstream_judge_budget_remaining_usd",
            "US dollars left in the LLM judge's budget per rolling window (hour, day); "
            "in-flight reservations count as spent. Absent without a USD ceiling.",
            ["window"],
            registry=r,
        )
        self.judge_budget_ceiling = Gauge(
            "evalstream_judge_budget_ceiling_usd",
            "The LLM judge's USD ceiling per rolling window (hour, day), as configured.",
            ["window"],
            registry=r,
        )
        self.judge_latency = Histogram(
            "evalstream_judge_latency_seconds",
            "Wall time of one LLM judge call.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )
        self.judge_human_agreement, self.judge_human_agreement_below_floor = judge_agreement_gauges(
            r
        )


def judge_agreement_gauges(registry: CollectorRegistry) -> tuple[Gauge, Gauge]:
    """The judge-versus-human calibration gauges, per rubric: Cohen's kappa and whether it is
    below the configured floor. Set by `evalstream review calibration` (and by a runtime that
    calibrates); a rubric whose kappa is undefined has no kappa sample and is flagged."""
    agreement = Gauge(
        "evalstream_judge_human_agreement",
        "Cohen's kappa between the LLM judge and human reviewers, per rubric.",
        ["rubric"],
        registry=registry,
    )
    below_floor = Gauge(
        "evalstream_judge_human_agreement_below_floor",
        "1 when the judge's agreement with human reviewers (kappa) is below the floor or "
        "undefined for the rubric, else 0.",
        ["rubric"],
        registry=registry,
    )
    return agreement, below_floor


class BoundedLabels:
    """Maps free-form label values (agent ids, variants) onto at most `limit` distinct ones.

    The first `limit` values seen keep their name; later ones share "other", so the number of
    series stays bounded whatever the traffic sends.
    """

    OTHER = "other"

    def __init__(self, limit: int = 50) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def __call__(self, value: object) -> str:
        text = "" if value is None else str(value)
        if text in self.seen:
            return text
        if len(self.seen) < self.limit:
            self.seen.add(text)
            return text
        return self.OTHER
