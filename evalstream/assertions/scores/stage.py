"""The scoring stage of the pipeline: a closed episode in, its scores and alerts out.

One object for every runtime (`check`, the embedded runtime, the worker), so an episode is
scored the same way everywhere. It chains the pure pieces: the baseline of the episode's key
(`baselines`), the five dimensions (`scoring`), the per-episode alert rules (`alert_rules`)
and, for the windowed detection (`regression`), the episode's `Observation`. The detector
itself is not called here: in the worker it runs where its (agent, variant) stream lives.

Settings, from the `scoring:` YAML/JSON file (every part optional):

    weights: {correctness: 40, cost: 20, tool_match: 20, latency: 10, safety: 10}
    safety: {...}                  # detectors and penalties, see `scoring.SafetyConfig`
    alerts: {cost: {warning: 20, critical: 40}, ...}   # see `alert_rules.AlertRules`
    regression: {reference: 150, guard: 100, ...}      # see `regression.RegressionConfig`
    baselines:
      mode: rolling                # or `file` (an explicit baseline run) or `none`
      file: baselines.json         # with mode: file
      window: 20                   # rolling: episodes per key
      key_attrs: [agent_id, case_id]
    sinks:                         # alerts also go to these webhooks (retried, never blocking)
      - {kind: slack, name: team-channel, url: "https://hooks.slack.com/services/..."}
      - {kind: webhook, name: pager, url: "https://example.internal/hook", secret: "..."}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evalstream.assertions.alerting.alert_rules import (
    AlertRules,
    EpisodeAlert,
    episode_passes,
    quality_passes,
)
from evalstream.assertions.alerting.regression import Observation, RegressionConfig
from evalstream.assertions.errors import InputError
from evalstream.assertions.evaluation.results import EpisodeResult
from evalstream.assertions.scores.baselines import (
    DEFAULT_KEY_ATTRS,
    BaselineKey,
    BaselineStore,
    FileBaselines,
    RollingBaselines,
)
from evalstream.assertions.scores.dimensions import (
    EpisodeScores,
    ScoringConfig,
    ScoringInput,
    score_episode,
)

JSON = Any
BASELINE_MODES = ("rolling", "file", "none")
SINK_KINDS = ("webhook", "slack")
SINK_FIELDS = ("kind", "name", "url", "headers", "secret", "queue_size")


class ScoringSettingsError(InputError):
    """The scoring settings file is invalid."""


@dataclass(frozen=True)
class ScoringSettings:
    scoring: ScoringConfig
    alerts: AlertRules
    regression: RegressionConfig
    baseline_mode: str = "rolling"
    baseline_file: str | None = None
    baseline_window: int = 20
    key_attrs: tuple[str, ...] = DEFAULT_KEY_ATTRS
    sinks: tuple[Mapping[str, JSON], ...] = ()

    @classmethod
    def load(
        cls, obj: Mapping[str, JSON] | None, *, base_dir: Path | None = None
    ) -> ScoringSettings:
        obj = dict(obj or {})
        unknown = set(obj) - {"weights", "safety", "alerts", "regression", "baselines", "sinks"}
        if unknown:
            raise ScoringSettingsError(
                f"unknown scoring setting(s) {', '.join(sorted(unknown))}; valid: weights, "
                "safety, alerts, regression, baselines, sinks"
            )
        baselines = obj.get("baselines") or {}
        if not isinstance(baselines, Mapping):
            raise ScoringSettingsError(
                f"baselines must be a mapping of mode, file, window, key_attrs; got {baselines!r}"
            )
        extra = set(baselines) - {"mode", "file", "window", "key_attrs"}
        if extra:
            raise ScoringSettingsError(
                f"unknown baselines setting(s) {', '.join(sorted(extra))}; valid: mode, file, "
                "window, key_attrs"
            )
        mode = baselines.get("mode", "rolling")
        if mode not in BASELINE_MODES:
            raise ScoringSettingsError(
                f"baselines.mode {mode!r} is not one of {', '.join(BASELINE_MODES)}"
            )
        file = baselines.get("file")
        if mode == "file" and not isinstance(file, str):
            raise ScoringSettingsError("baselines.mode file needs baselines.file: PATH")
        if isinstance(file, str) and base_dir is not None and not Path(file).is_absolute():
            file = str(base_dir / file)
        window = baselines.get("window", 20)
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ScoringSettingsError(f"baselines.window must be an integer >= 1, got {window!r}")
        key_attrs = baselines.get("key_attrs", list(DEFAULT_KEY_ATTRS))
        if not (
            isinstance(key_attrs, list) and key_attrs and all(isinstance(a, str) for a in key_attrs)
        ):
            raise ScoringSettingsError("baselines.key_attrs must be a non-empty list of names")
        return cls(
            scoring=ScoringConfig.from_mapping(
                {k: obj[k] for k in ("weights", "safety") if k in obj}
            ),
            alerts=AlertRules.load(obj.get("alerts")),
            regression=RegressionConfig.load(obj.get("regression")),
            baseline_mode=mode,
            baseline_file=file if isinstance(file, str) else None,
            baseline_window=window,
            key_attrs=tuple(key_attrs),
            sinks=_sinks(obj.get("sinks")),
        )

    def baseline_store(self) -> BaselineStore | None:
        if self.baseline_mode == "none":
            return None
        if self.baseline_mode == "file":
            assert self.baseline_file is not None
            return FileBaselines.load(self.baseline_file)
        return RollingBaselines(window=self.baseline_window, key_attrs=self.key_attrs)


@dataclass(frozen=True)
class ScoredEpisode:
    scores: EpisodeScores
    alerts: list[EpisodeAlert]
    passed: bool
    observation: Observation
    baseline_key: BaselineKey | None

    def record_fields(self) -> dict[str, JSON]:
        """What joins the episode's record: scores, alerts and the pass including alerts."""
        return {
            "scores": self.scores.to_json(),
            "alerts": [a.to_json() for a in self.alerts],
            "passed_with_alerts": self.passed,
        }


def _sinks(value: JSON) -> tuple[Mapping[str, JSON], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ScoringSettingsError("sinks must be a list of {kind, name, url} mappings")
    out = []
    for i, sink in enumerate(value):
        if not isinstance(sink, Mapping):
            raise ScoringSettingsError(f"sinks[{i}] must be a mapping with kind, name and url")
        extra = set(sink) - set(SINK_FIELDS)
        if extra:
            raise ScoringSettingsError(
                f"sinks[{i}]: unknown field(s) {', '.join(sorted(extra))}; valid: "
                + ", ".join(SINK_FIELDS)
            )
        if sink.get("kind") not in SINK_KINDS:
            raise ScoringSettingsError(
                f"sinks[{i}].kind {sink.get('kind')!r} is not one of {', '.join(SINK_KINDS)}"
            )
        for name in ("name", "url"):
            if not isinstance(sink.get(name), str) or not sink.get(name):
                raise ScoringSettingsError(f"sinks[{i}] needs a non-empty `{name}`")
        out.append(dict(sink))
    return tuple(out)


def load_scoring_settings(path: str | Path) -> ScoringSettings:
    """From a YAML (or JSON) file; relative baseline files resolve against its folder."""
    file = Path(path)
    try:
        obj = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScoringSettingsError(f"cannot read scoring settings {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ScoringSettingsError(f"{path}: not valid YAML: {exc}") from exc
    if obj is not None and not isinstance(obj, Mapping):
        raise ScoringSettingsError(f"{path}: expected a mapping of scoring settings")
    try:
        return ScoringSettings.load(obj, base_dir=file.parent)
    except InputError as exc:
        raise ScoringSettingsError(f"{path}: {exc}") from exc


class ScoringStage:
    """Scores closed episodes against the baseline store (which it then updates)."""

    def __init__(
        self,
        settings: ScoringSettings,
        baselines: BaselineStore | None,
        holding: Callable[[str, str], bool] | None = None,
    ) -> None:
        """`holding(agent_id, variant)`: whether that stream's regression is firing (the
        detector's `holding`); its episodes are then not added to the rolling baseline."""
        self.settings = settings
        self.baselines = baselines
        self.holding = holding

    def score(self, result: EpisodeResult, tool_names: Sequence[str]) -> ScoredEpisode:
        inp = ScoringInput.from_result(result, tool_names)
        store = self.baselines
        key = store.key_for(inp.attrs) if store is not None else None
        baseline = store.get(key) if store is not None and key is not None else None
        scores = score_episode(inp, baseline, self.settings.scoring)
        alerts = self.settings.alerts.evaluate(scores)
        passed = episode_passes(result.passed, alerts)
        observation = Observation.from_scores(
            inp,
            scores,
            quality_passes(result.passed, alerts),
            warmup=store is not None and baseline is None,
        )
        holding = self.holding
        if store is not None and not (
            holding is not None and holding(observation.agent_id, observation.variant)
        ):
            store.observe(inp)  # after scoring: an episode is never its own baseline
        return ScoredEpisode(
            scores=scores,
            alerts=alerts,
            passed=passed,
            observation=observation,
            baseline_key=key,
        )
