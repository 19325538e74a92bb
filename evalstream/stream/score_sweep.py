"""The episode-store workflow's workflow: score episode-store episodes against a baseline, and the
nightly sweep.

`score_episodes(settings, now=...)` reads episodes (from a store or files), turns each into
signals, evaluates the suites on them (without suites, it computes each episode's result
directly from the episode, `connectors.codecs.store_results`), scores them against the
chosen baseline, applies the per-episode alert rules and the windowed detector, and returns
a `ScoreRun`.
`run_nightly(settings, now=...)` does that for a time window (`since: 24h`) and writes the
JSON and Markdown reports into a directory; it is a plain coroutine, callable from a cron
job (`evalstream nightly`) or a faust crontab.

Baselines (exactly one mode):
- `rolling` (the default): a production baseline per key (`agent_id` + `case_id`), the
  medians of the last `rolling_window` episodes scored before this one (at least
  `rolling_min_episodes`); with `baseline_state` it is loaded from and saved to a JSON file,
  so consecutive nightly runs continue it. Re-runs are idempotent: the file also keeps the
  state the run started from and the ids it scored, and a run whose episodes include every
  one of those (the same window again, or a wider one) starts from that earlier state, so it
  gives the same scores and exit code; episodes of the window that are already in the state
  otherwise leave it before scoring (they are observed again, in order, never twice).
- `file`: fixed baselines from `baseline_file` (`FileBaselines` JSON). An episode whose agent
  has no baseline in the file is rejected (a baseline of another agent is an error); one
  whose case has none is scored without a baseline and says so.
- `run`: the episodes tagged `metadata.run_id == baseline_run` (read from the same source)
  are the baseline; they are not scored themselves.
- `none`: no baseline; cost, latency and tool match are unscored (never compared with the
  episode itself).

The filters (agent id, model, status, since, until, limit) go to the store, or apply to
episodes from files as the store would apply them (`EpisodeQuery.matches`); from files,
`limit` applies only when given. Episodes still `running` are skipped (listed in the run).
Bad episodes are rejected one by one with the codec's message; the rest are still scored.
A file whose first record is not an episode and that looks like another kind of file
(signals, a suite, a saved run...) stops the run with one error naming the command that reads
it (`evalstream.assertions.file_kinds`).

Streamed runs (`StreamPlan`: `evalstream score` and `nightly` without a saved baseline or
a baseline state) hold neither the decoded episodes nor the scored ones: decoded
episodes are put in start order by an external merge sort (`episode_sort`, runs of
`run_size` spilled to the plan's scratch directory), each scored episode's record is
spilled there too (`scored_records`) and its scores counted in a `RunTally`, which also
picks the few episodes a Markdown report lists (`worst_episodes`); repeated ids (a repeated
id keeps its first copy) are found by sorting ids in runs too (`id_ledger`). Memory then
holds one sorted run, the baseline run's episodes and the per-key state, whatever the
input's size or order; the results and the report are the same byte for byte.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evalstream.assertions.alerting.alert_rules import AlertRules
from evalstream.assertions.alerting.regression import RegressionConfig, RegressionDetector
from evalstream.assertions.errors import InputError
from evalstream.assertions.file_kinds import FileKind
from evalstream.assertions.reports.score_run_json import episode_json, write_score_run_json
from evalstream.assertions.scores.baselines import BaselineStore, FileBaselines, RollingBaselines
from evalstream.assertions.scores.dimensions import (
    BaselineMismatchError,
    ScoringConfig,
    ScoringInput,
)
from evalstream.assertions.scores.run import Scorer, ScoreRun, ScoreRunError
from evalstream.assertions.scores.run_tally import RunTally
from evalstream.assertions.scores.worst_episodes import WorstEpisodes
from evalstream.assertions.wire.pricing import default_pricing, load_pricing
from evalstream.connectors.codecs.store_episodes import StoreEpisodeError, episode_to_signals
from evalstream.connectors.codecs.store_results import episode_result
from evalstream.connectors.episode_store import (
    MAX_PAGE,
    EpisodeQuery,
    EpisodeStoreClient,
)
from evalstream.connectors.files.episode_files import FileItem, FileProblem, read_episode_file
from evalstream.connectors.files.file_kinds import expecting, raise_if_other_kind
from evalstream.stream.console.store_progress import StoreProgressLine
from evalstream.stream.episode_sort import DecodedEpisode, EpisodeSorter, place_of
from evalstream.stream.id_ledger import IdLedger
from evalstream.stream.process_shards import available_cores, run_shards
from evalstream.stream.score_shares import Share, ShareResult, merge_shares
from evalstream.stream.scored_records import MergedRecords, RecordSpill

# Suites (and the assertion engine behind them), the judge, YAML and the Markdown report are
# imported when a run needs them: scoring store episodes without suites starts faster.
if TYPE_CHECKING:
    from evalstream.assertions.evaluation.assembly import ClosedEpisode
    from evalstream.assertions.suite_format.suites import Suite

JSON = Any
BaselineMode = Literal["rolling", "file", "run", "none"]
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
BASELINE_RUN_LIMIT = 5000  # episodes read to find a baseline run's episodes in a store
# Files at least this big are scored on every core (a fork and a second parse pay off).
SHARD_MIN_BYTES = 8_000_000


class SweepError(InputError):
    """Sweep settings that do not work together (named with the fix)."""


def parse_since(text: str, now: datetime) -> datetime:
    """`24h`, `90m`, `7d`, `2w`, `30s` before `now`, or an ISO 8601 time."""
    match = _DURATION.match(text)
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _UNIT_S[match.group(2)])
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise SweepError(
            f"--since {text!r} is neither a duration (24h, 90m, 7d) nor an ISO 8601 time"
        ) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class ScoreSettings(BaseModel):
    """What to score and against what; loadable from YAML (`evalstream nightly --config`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    store_url: str | None = Field(None, description="Episode store, e.g. http://localhost:8100.")
    files: list[str] = Field(default_factory=list, description="Episode files (JSON/NDJSON).")
    agent_id: str | None = None
    model: str | None = None
    status: str | None = None
    since: str | None = Field(None, description="A duration before now (24h) or ISO time.")
    until: str | None = None
    limit: int | None = Field(50, ge=1, description="At most this many episodes (None: all).")
    timeout_s: float = Field(10.0, gt=0)
    progress: bool = Field(False, description="A progress line on stderr while reading a store.")
    suites: list[str] = Field(default_factory=list)
    pricing: str | None = None
    judge: str | None = Field(
        None,
        description="module:factory returning the Judge of llm.judge (default: the Anthropic "
        "judge when ANTHROPIC_API_KEY is set).",
    )
    baseline: BaselineMode = "rolling"
    baseline_file: str | None = None
    baseline_run: str | None = None
    baseline_state: str | None = None
    rolling_window: int = Field(20, ge=1)
    rolling_min_episodes: int = Field(5, ge=1)
    scoring: dict[str, JSON] = Field(default_factory=dict, description="Weights and safety.")
    alert_rules: dict[str, JSON] = Field(default_factory=dict)
    windowed: bool = True
    regression: dict[str, JSON] = Field(default_factory=dict)
    unknown_steps: Literal["error", "keep"] = "error"
    workers: int | None = Field(
        None,
        ge=1,
        description="Processes scoring files (by agent); default: every core for files of "
        "8 MB or more without suites or --baseline-state, else one.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ScoreSettings:
        if (self.store_url is None) == (not self.files):
            raise ValueError("give either a store URL (--store-url) or episode files, not both")
        if self.baseline == "file" and not self.baseline_file:
            raise ValueError("baseline `file` needs --baseline FILE")
        if self.baseline == "run" and not self.baseline_run:
            raise ValueError("baseline `run` needs --baseline-run RUN_ID")
        if self.baseline_state and self.baseline != "rolling":
            raise ValueError("--baseline-state keeps a rolling baseline; it needs baseline rolling")
        if self.rolling_min_episodes > self.rolling_window:
            raise ValueError("rolling_min_episodes must be <= rolling_window")
        if (self.workers or 1) > 1 and (self.store_url or self.suites or self.baseline_state):
            raise ValueError(
                "--workers above 1 scores files without suites or --baseline-state; drop "
                "--workers (one process) or those options"
            )
        return self

    @classmethod
    def build(cls, values: Mapping[str, JSON]) -> ScoreSettings:
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise SweepError(_problems(exc)) from exc


class NightlySettings(ScoreSettings):
    """A nightly sweep: the last `since` of the store, reports into `out_dir`."""

    out_dir: str = "reports"
    since: str | None = "24h"
    limit: int | None = Field(None, ge=1)
    fail_on: Literal["critical", "failed", "never"] = "critical"

    @classmethod
    def load(cls, path: str | None, overrides: Mapping[str, JSON]) -> NightlySettings:
        """Settings from a YAML file, overridden by the given (non-None) values."""
        import yaml  # noqa: PLC0415

        values: dict[str, JSON] = {}
        if path is not None:
            try:
                loaded = yaml.safe_load(Path(path).read_text("utf-8")) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise SweepError(f"{path}: cannot read the nightly settings: {exc}") from exc
            if not isinstance(loaded, dict):
                raise SweepError(f"{path}: nightly settings must be a mapping")
            values.update(loaded)
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            where = f"{path}: " if path else ""
            raise SweepError(where + _problems(exc)) from exc


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
        for err in exc.errors()
    )


SORT_RUN_EPISODES = 20_000  # a streamed run sorts this many episodes in memory at a time


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """Stream the run's episodes out as they are scored (see the module docstring)."""

    scratch: str  # a directory for the sorted runs and the spilled records
    records: bool = True  # render each scored episode's record (for a results file)
    listed: bool = False  # pick the episodes a Markdown report lists
    run_size: int = SORT_RUN_EPISODES


def _decode(
    obj: JSON,
    where: str,
    label: str,
    settings: ScoreSettings,
    *,
    direct: bool,
    position: int = 0,
) -> DecodedEpisode:
    """One episode to score; raises StoreEpisodeError for an invalid one (the same with or
    without `direct`, which skips signals when no suite needs them)."""
    if direct:
        found = episode_result(obj, where=label, unknown_steps=settings.unknown_steps)
        if found is not None:
            result = found.result
            return DecodedEpisode(
                where,
                result.episode_id,
                found.start,
                result.attrs,
                found.running,
                direct=found,
                position=position,
            )
    signals = episode_to_signals(obj, where=label, unknown_steps=settings.unknown_steps)
    first = signals[0]
    running = obj.get("status") == "running"
    return DecodedEpisode(
        where, first.episode_id, first.ts, first.attrs or {}, running, signals, position=position
    )


def _queries(
    settings: ScoreSettings, now: datetime
) -> tuple[EpisodeQuery, EpisodeQuery, int | None]:
    """The run's filters, the baseline run's (it may lie outside the scored window: only
    agent and model select it) and the limit (files: every episode unless --limit was
    given; a store: its page limit, default 50)."""
    from_files = settings.store_url is None
    limit = None if from_files and "limit" not in settings.model_fields_set else settings.limit
    query = EpisodeQuery(
        agent_id=settings.agent_id,
        model=settings.model,
        status=settings.status,
        since=None if settings.since is None else parse_since(settings.since, now),
        until=None if settings.until is None else parse_since(settings.until, now),
        limit=limit,
    )
    base_query = EpisodeQuery(
        agent_id=settings.agent_id, model=settings.model, limit=BASELINE_RUN_LIMIT
    )
    return query, base_query, limit


async def _items(settings: ScoreSettings, now: datetime) -> AsyncIterator[tuple[str, JSON]]:
    if settings.store_url is None:
        for item in _file_items(settings, now):
            yield item
        return
    query, base_query, _ = _queries(settings, now)
    on_page = StoreProgressLine() if settings.progress else None
    async with EpisodeStoreClient(settings.store_url, timeout_s=settings.timeout_s) as store:
        async for episode in store.iter_episodes(query, page_size=MAX_PAGE, on_page=on_page):
            yield f"{settings.store_url}/v1/episodes/{_id_of(episode)}", episode
        if on_page is not None:
            on_page.done()
        if settings.baseline == "run":
            async for episode in store.iter_episodes(base_query, page_size=MAX_PAGE):
                if _in_run(episode, settings):
                    yield f"{settings.store_url}/v1/episodes/{_id_of(episode)}", episode


def _episode_file_items(paths: list[str]) -> Iterator[FileItem | FileProblem]:
    """The files' items; a file whose first item is not an episode (no `steps` list) and
    that looks like another kind of file (signals, a suite...) is a WrongFileKindError that
    names the command reading it, instead of one rejected episode per record."""
    for path in paths:
        items = read_episode_file(path)
        first = next(items, None)
        if first is None:
            continue
        if isinstance(first, FileProblem) or not (
            isinstance(first.episode, Mapping) and isinstance(first.episode.get("steps"), list)
        ):
            raise_if_other_kind(path, FileKind.STORE_EPISODES)
        yield first
        yield from items


def _in_run(episode: JSON, settings: ScoreSettings) -> bool:
    """Whether an episode belongs to the explicit baseline run (`metadata.run_id`)."""
    if settings.baseline != "run" or not isinstance(episode, Mapping):
        return False
    metadata = episode.get("metadata")
    return isinstance(metadata, Mapping) and metadata.get("run_id") == settings.baseline_run


def _id_of(episode: JSON) -> str:
    return str(episode.get("episode_id")) if isinstance(episode, Mapping) else "?"


def _baseline_store(settings: ScoreSettings) -> tuple[BaselineStore | None, dict[str, JSON]]:
    mode = settings.baseline
    if mode == "none":
        return None, {"mode": "none", "detail": "cost, latency and tool match not scored"}
    if mode == "file":
        assert settings.baseline_file is not None
        store = FileBaselines.load(settings.baseline_file)
        return store, {"mode": "file", "detail": settings.baseline_file, "keys": len(store)}
    if mode == "run":
        return None, {"mode": "run", "detail": f"run_id={settings.baseline_run}"}
    state = settings.baseline_state
    rolling = RollingBaselines(settings.rolling_window, min_episodes=settings.rolling_min_episodes)
    if state and Path(state).exists():
        rolling = RollingBaselines.from_json(_read_state(state).current)
    detail = (
        f"last {rolling.window} episodes per agent_id + case_id, at least {rolling.min_episodes}"
    )
    info: dict[str, JSON] = {"mode": "rolling", "detail": detail}
    if state:
        info["state"] = state
    return rolling, info


def _suite(path: str) -> Suite:
    from evalstream.assertions.suite_format.suites import load_suite  # noqa: PLC0415

    with expecting(path, FileKind.SUITE):
        return load_suite(path)


def shard_count(settings: ScoreSettings) -> int:
    """How many processes score the run: `workers` when given, else every core for big
    files (see SHARD_MIN_BYTES) when nothing stops it (a store, suites and their judge,
    a baseline state file carried between runs), else one."""
    if settings.workers is not None:
        return settings.workers
    if settings.store_url or settings.suites or settings.baseline_state:
        return 1
    size = 0
    for path in settings.files:
        try:
            size += Path(path).stat().st_size
        except OSError:
            return 1  # reading it reports the problem
    return available_cores() if size >= SHARD_MIN_BYTES else 1


def _suite_set(suites: list[Suite]) -> Any:
    if not suites:
        return None
    from evalstream.assertions.suite_format.suites import SuiteSet  # noqa: PLC0415

    return SuiteSet(suites)


def _scorer(settings: ScoreSettings) -> tuple[Scorer, Any, dict[str, JSON]]:
    """The run's scorer, its judge (None without suites) and the baseline's description."""
    pricing = load_pricing(Path(settings.pricing)) if settings.pricing else default_pricing()
    suites = [_suite(path) for path in settings.suites]
    judge = None
    if suites:
        from evalstream.stream.judge import judge_from  # noqa: PLC0415

        judge = judge_from(settings.judge, pricing=pricing)
    baselines, baseline_info = _baseline_store(settings)
    detector = (
        RegressionDetector(RegressionConfig.load(settings.regression))
        if settings.windowed
        else None
    )
    scorer = Scorer(
        _suite_set(suites),
        baselines=baselines,
        config=ScoringConfig.from_mapping(settings.scoring),
        rules=AlertRules.load(settings.alert_rules),
        detector=detector,
        pricing=pricing,
        require_agent_baseline=settings.baseline == "file",
    )
    return scorer, judge, baseline_info


async def score_episodes(
    settings: ScoreSettings, *, now: datetime, stream: StreamPlan | None = None
) -> ScoreRun:
    """Score as the settings say (see the module docstring); raises InputError subclasses
    for settings and store problems, records bad episodes in the run. With `stream` (and
    no baseline state), the run's episodes are streamed out: the run has
    a `tally`, and its records are read from `stream.scratch` (keep it until written)."""
    scorer, judge, baseline_info = _scorer(settings)
    if settings.baseline_state:
        stream = None
    shards = shard_count(settings)
    if shards > 1:
        parts = run_shards(shards, lambda index: _score_share(settings, now, index, shards, stream))
        if any(part is None for part in parts):  # the input cannot be split exactly
            for part in parts:
                if part is not None:
                    part.discard()
            parts = [_score_share(settings, now, 0, 1, stream)]
        merged = merge_shares([p for p in parts if p is not None])
    else:
        merged = await _sweep_items(settings, now, scorer, judge, stream)
    scorer.episodes, scorer.regressions = merged.episodes, merged.regressions
    scorer.rejected, scorer.skipped = merged.rejected, merged.skipped
    source: dict[str, JSON]
    if settings.store_url is not None:
        source = {
            "store": settings.store_url,
            "filters": {
                "agent_id": settings.agent_id,
                "model": settings.model,
                "status": settings.status,
                "since": settings.since,
                "until": settings.until,
                "limit": settings.limit,
            },
        }
    else:
        source = {"files": list(settings.files)}
    created = now.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    run = scorer.run(created_at=created, source=source, baseline=baseline_info)
    if merged.tally is not None:
        run.tally = merged.tally
        run.rendered_episodes = MergedRecords(merged.record_paths) if merged.record_paths else None
    else:
        run.rendered_episodes = merged.episode_json
    return run


async def _sweep_items(
    settings: ScoreSettings, now: datetime, scorer: Scorer, judge: Any, stream: StreamPlan | None
) -> ShareResult:
    """A run in this process."""
    sweep = _Sweep(settings, scorer, Share(), stream)
    try:
        async for where, obj in _items(settings, now):
            sweep.take(where, obj)
        await sweep.score(judge)
    except BaseException:
        sweep.discard()
        raise
    return sweep.result()


def _score_share(
    settings: ScoreSettings, now: datetime, index: int, count: int, stream: StreamPlan | None
) -> ShareResult | None:
    """One process's share of a sharded run over files (no suites, so no judge to await);
    None when the input cannot be split exactly (`_Sweep.fits_one_process`)."""
    scorer, _, _ = _scorer(settings)
    sweep = _Sweep(settings, scorer, Share(index, count), stream)
    try:
        for where, obj in _file_items(settings, now):
            sweep.take(where, obj)
        if count > 1 and not sweep.fits_one_process():
            sweep.discard()
            return None
        for _ in sweep.scored():
            raise AssertionError("a sharded run has no suites, so nothing to judge")
    except BaseException:
        sweep.discard()
        raise
    return sweep.result()


class _Sweep:
    """Reads a run's items, decodes this process's share of them, scores them in start order;
    every record is tagged with its place in the whole run (`ShareResult`)."""

    def __init__(
        self, settings: ScoreSettings, scorer: Scorer, share: Share, stream: StreamPlan | None
    ) -> None:
        self.settings = settings
        self.scorer = scorer
        self.share = share
        self.out = ShareResult()
        scratch = stream.scratch if stream is not None else None  # None: held in memory
        run_size = stream.run_size if stream is not None else 0
        # Decoded episodes wait here to be scored in start order (spilled in sorted runs
        # when streamed); the baseline run's aside.
        self.sorter = EpisodeSorter(scratch, run_size)
        self.base: list[DecodedEpisode] = []
        # The ids of the decoded episodes (one process: a repeated id keeps its first copy)
        # or of every item (a split run goes back to one process when an id repeats).
        self.ids = IdLedger(scratch, run_size)
        self.repeat_positions: set[int] | None = None
        # Streamed, a scored episode is counted and its record spilled, not kept.
        self.tally = (
            RunTally(listed=WorstEpisodes() if stream.listed else None)
            if stream is not None
            else None
        )
        self.records = (
            RecordSpill(stream.scratch) if stream is not None and stream.records else None
        )
        if stream is not None:
            scorer.keep_scored = False
        self.position = 0  # of the item in the run's input
        self.streams: set[tuple[JSON, JSON]] = set()  # raw (agent, variant) pairs
        self.keys: set[tuple[JSON, JSON]] = set()  # raw (agent, case) pairs
        self.direct = not scorer.has_suites  # no suite needs the signals
        self.label = (
            f"episode store {settings.store_url}: episode"
            if settings.store_url is not None
            else None
        )

    def take(self, where: str, obj: JSON) -> None:
        """One input item: decoded when this process's share owns it, or when it belongs to
        the baseline run (every share needs the whole baseline; only the owner reports it)."""
        position = self.position
        self.position += 1
        if self.share.count > 1:
            self._count_streams(obj, position)
        mine = self.share.owns(obj)
        if not mine and not _in_run(obj, self.settings):
            return
        if isinstance(obj, InputError):
            self._reject(position, where, "invalid_json", str(obj))
            return
        label = self.label or f"{where}: episode"
        try:
            item = _decode(obj, where, label, self.settings, direct=self.direct, position=position)
        except StoreEpisodeError as exc:
            if mine:
                self._reject(position, where, exc.reason, str(exc))
            return
        if item.running:
            if mine:
                self.scorer.skip(item.episode_id, "still running")
                self.out.skipped_at.append(position)
        else:
            if self.share.count == 1:
                self.ids.add(item.episode_id, position)
            settings = self.settings
            if settings.baseline == "run" and item.attrs.get("run_id") == settings.baseline_run:
                self.base.append(item)
            else:
                self.sorter.add(item)

    def _repeats(self) -> set[int]:
        """The input positions of the items that repeat an id read earlier (once read)."""
        if self.repeat_positions is None:
            self.repeat_positions = self.ids.later_copies()
        return self.repeat_positions

    def _score(self, item: DecodedEpisode, closed: ClosedEpisode | None) -> None:
        """Score one decoded episode (`closed`: its signals evaluated, judgements resolved)."""
        scorer, out = self.scorer, self.out
        key = item.place
        before = len(scorer.regressions)
        try:
            if closed is not None:
                scored = scorer.score(closed)
            else:
                assert item.direct is not None
                scored = scorer.score_result(item.direct.result, item.direct.tool_names)
        except BaselineMismatchError as exc:
            scorer.reject(item.where, "baseline_mismatch", str(exc))
            out.rejected_at.append((1, item.start, item.episode_id))
        else:
            if self.tally is None:
                out.episode_keys.append(key)
            else:
                self.tally.add(scored, key)
                if self.records is not None:
                    self.records.write(key, episode_json(scored))
        out.regression_keys.extend([key] * (len(scorer.regressions) - before))

    def discard(self) -> None:
        """Drop what a run that will not be used has spilled."""
        self.sorter.discard()
        self.ids.discard()
        if self.records is not None:
            self.records.discard()

    def _reject(self, position: int, where: str, reason: str, message: str) -> None:
        self.scorer.reject(where, reason, message)
        self.out.rejected_at.append((0, float(position), ""))

    def _count_streams(self, obj: JSON, position: int) -> None:
        if isinstance(obj, Mapping):
            metadata = obj.get("metadata")
            meta = metadata if isinstance(metadata, Mapping) else {}
            agent = _hashable(obj.get("agent_id"))
            self.streams.add((agent, _hashable(meta.get("variant"))))
            self.keys.add((agent, _hashable(meta.get("case_id"))))
            episode_id = obj.get("episode_id")
            if isinstance(episode_id, str):
                self.ids.add(episode_id, position)

    def fits_one_process(self) -> bool:
        """Whether no regression stream or rolling baseline key of the input could be evicted
        and no episode id is listed twice (then every share's state is independent of the
        others', and each keeps the copy one process would)."""
        if self._repeats():
            return False
        detector, baselines = self.scorer.detector, self.scorer.baselines
        if detector is not None and len(self.streams) > detector.config.max_streams:
            return False
        return not (isinstance(baselines, RollingBaselines) and len(self.keys) > baselines.max_keys)

    def scored(self) -> Iterator[ClosedEpisode]:
        """Score the decoded episodes in start order; yields each closed episode that has
        judgements pending, to be resolved before the iteration goes on."""
        settings, scorer = self.settings, self.scorer
        # One process drops the later copies of a repeated id; a split run has none.
        repeats = self._repeats() if self.share.count == 1 else set()
        if settings.baseline == "run":
            base = sorted((d for d in self.base if d.position not in repeats), key=place_of)
            self.base = []
            _use_baseline_run(scorer, base, settings)
        episodes: Iterator[DecodedEpisode] = (
            d for d in self.sorter.in_order() if d.position not in repeats
        )
        baselines = scorer.baselines
        state_path = settings.baseline_state
        window_ids: list[str] = []
        started_from = None
        if isinstance(baselines, RollingBaselines) and state_path:  # never streamed
            ordered = list(episodes)
            window_ids = [d.episode_id for d in ordered]
            baselines = scorer.baselines = _starting_state(state_path, baselines, window_ids)
            started_from = baselines.to_json()
            ordered.reverse()
            episodes = _drained(ordered)
        for item in episodes:
            closed = None
            if item.signals is not None:
                closed = scorer.evaluate(item.signals)
                if closed.pending:
                    yield closed
            self._score(item, closed)
        if isinstance(baselines, RollingBaselines) and state_path:
            saved = BaselineState(baselines.to_json(), started_from, frozenset(window_ids))
            Path(state_path).write_bytes(orjson.dumps(saved.to_json(), option=orjson.OPT_INDENT_2))

    async def score(self, judge: Any) -> None:
        for closed in self.scored():
            from evalstream.stream.offline import resolve_judgements  # noqa: PLC0415

            await resolve_judgements([closed], judge)

    def result(self) -> ShareResult:
        """The share's records, each episode's also rendered for the results file (here, in
        the process that scored it: a split run renders on every core)."""
        out, scorer = self.out, self.scorer
        out.episodes, out.regressions = scorer.episodes, scorer.regressions
        out.rejected, out.skipped = scorer.rejected, scorer.skipped
        if self.tally is None:
            out.episode_json = [episode_json(e) for e in scorer.episodes]
            return out
        out.tally = self.tally
        if self.records is not None:
            self.records.close()
            out.record_paths = [self.records.path]
        # Streamed, rejections while scoring came between those while reading: one
        # process's order puts every read-time rejection first (`RejectionTag`).
        tagged = sorted(zip(out.rejected_at, out.rejected, strict=True), key=lambda p: p[0])
        out.rejected_at = [tag for tag, _ in tagged]
        out.rejected = [rejected for _, rejected in tagged]
        return out


def _hashable(value: JSON) -> JSON:
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


def _file_items(settings: ScoreSettings, now: datetime) -> Iterator[tuple[str, JSON]]:
    """The items of a run over files (what `_items` yields for them), synchronously."""
    query, base_query, limit = _queries(settings, now)
    taken = 0
    for item in _episode_file_items(settings.files):
        if isinstance(item, FileProblem):
            yield item.where, item.error
        elif _in_run(item.episode, settings) and base_query.matches(item.episode):
            yield item.where, item.episode
        elif query.matches(item.episode) and (limit is None or taken < limit):
            taken += 1
            yield item.where, item.episode


STATE_KIND = "rolling-baseline-state"


@dataclass(frozen=True, slots=True)
class BaselineState:
    """The `--baseline-state` file: the rolling baselines after a run (`current`), the state
    that run started from (`started_from`) and the episode ids it scored. A file holding only
    the rolling baselines' JSON (an older file) is read as `current` alone."""

    current: JSON
    started_from: JSON | None = None
    scored: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, JSON]:
        return {
            "kind": STATE_KIND,
            "version": 1,
            "current": self.current,
            "started_from": self.started_from,
            "scored": sorted(self.scored),
        }


def _read_state(path: str) -> BaselineState:
    try:
        obj = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise SweepError(f"{path}: cannot read the rolling baseline state: {exc}") from exc
    if not isinstance(obj, Mapping) or obj.get("kind") != STATE_KIND:
        return BaselineState(obj)
    scored = obj.get("scored", [])
    if not isinstance(scored, list) or not all(isinstance(i, str) for i in scored):
        raise SweepError(f"{path}: `scored` must be a list of episode ids")
    return BaselineState(obj.get("current"), obj.get("started_from"), frozenset(scored))


def _starting_state(path: str, loaded: RollingBaselines, window_ids: list[str]) -> RollingBaselines:
    """The rolling baselines a run over `window_ids` starts from (see the module docstring)."""
    if not Path(path).exists():
        return loaded
    state = _read_state(path)
    ids = set(window_ids)
    if state.scored and state.started_from is not None and state.scored <= ids:
        return RollingBaselines.from_json(state.started_from)  # a re-run of that window
    current = loaded.to_json()
    for key in current["keys"]:
        key["entries"] = [e for e in key["entries"] if e["episode_id"] not in ids]
    return RollingBaselines.from_json(current)


def _drained(items: list[DecodedEpisode]) -> Iterator[DecodedEpisode]:
    """`items` from the last, each freed once the caller is done with it."""
    while items:
        yield items.pop()


def _use_baseline_run(scorer: Scorer, base: list[DecodedEpisode], settings: ScoreSettings) -> None:
    """Make the baseline run's episodes (in start order) the scorer's fixed baselines."""
    run_id = settings.baseline_run
    if not base:
        raise ScoreRunError(
            f"no episode of baseline run {run_id!r} found (episodes name their run in "
            "`metadata.run_id`); check --baseline-run, or use --baseline FILE"
        )
    inputs = []
    for item in base:
        if item.direct is not None:
            direct = item.direct
            inputs.append(ScoringInput.from_result(direct.result.reported(), direct.tool_names))
            continue
        assert item.signals is not None
        closed = scorer.evaluate(item.signals)
        inputs.append(
            ScoringInput.from_result(closed.report(), closed.evaluation.facts.tool_names())
        )
    scorer.baselines = FileBaselines.from_results(inputs, source=f"run:{run_id}")
    scorer.require_agent_baseline = True
    scorer.set_baseline_agents()


def _scratch_in(directory: Path) -> tempfile.TemporaryDirectory[str]:
    """A scratch directory inside `directory`, removed on leaving (as `score`'s)."""
    try:
        return tempfile.TemporaryDirectory(
            prefix=".evalstream-score-", dir=directory, ignore_cleanup_errors=True
        )
    except OSError as exc:
        raise SweepError(
            f"cannot write in the report directory {directory}: {exc.strerror}"
        ) from exc


@dataclass(frozen=True, slots=True)
class NightlyResult:
    run: ScoreRun
    json_path: Path
    markdown_path: Path
    exit_code: int


async def run_nightly(settings: NightlySettings, *, now: datetime) -> NightlyResult:
    """One sweep: score the window, write `score-<time>.json` and `.md` into `out_dir`.

    `exit_code`: 2 when episodes were rejected; 1 on `fail_on` (default: a CRITICAL
    per-episode alert or a CRITICAL windowed regression); else 0.
    """
    out = Path(settings.out_dir)
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SweepError(f"cannot create the report directory {out}: {exc.strerror}") from exc
    try:
        return await _nightly_into(out, settings, now)
    except BaseException:
        if made:  # a run that failed leaves no empty report directory behind
            with contextlib.suppress(OSError):
                out.rmdir()
        raise


async def _nightly_into(out: Path, settings: NightlySettings, now: datetime) -> NightlyResult:
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    json_path = out / f"score-{stamp}.json"
    markdown_path = out / f"score-{stamp}.md"
    from evalstream.assertions.reports.score_report import render_run_markdown  # noqa: PLC0415

    # The sorted runs and the records wait in the report directory until written.
    with _scratch_in(out) as scratch:
        stream = StreamPlan(scratch, records=True, listed=True)
        run = await score_episodes(settings, now=now, stream=stream)
        summary = run.summary()
        write_score_run_json(json_path, run, summary)
    markdown_path.write_text(render_run_markdown(run, summary), encoding="utf-8")
    if run.rejected:
        code = 2
    elif settings.fail_on == "critical":
        code = 1 if run.critical else 0
    elif settings.fail_on == "failed":
        code = run.exit_code()
    else:
        code = 0
    return NightlyResult(run, json_path, markdown_path, code)
