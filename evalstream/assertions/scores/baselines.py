"""Baselines: what an episode is compared with when it is scored (DESIGN §6).

A baseline is selected by its key, the values of `key_attrs` in the episode's attrs (default
`agent_id` + `case_id`; a missing attr is part of the key as null, so live traffic without a
case id shares one baseline per agent). Two stores:

- `FileBaselines`: fixed baselines from an explicit baseline run — a JSON file, or built with
  `from_results` from that run's episodes (e.g. those whose `attrs.run_id` names the run).
- `RollingBaselines`: a production baseline per key over its last N episodes (default 20),
  robust to outliers: median cost, median latency, the modal tool sequence (ties → the most
  recent), the majority outcome (ties → the most recent) and the median step count. At most N
  entries per key and at most `max_keys` keys, the least recently used evicted first.

Use a store as `baseline = store.get(store.key_for(inp.attrs))`, score, then
`store.observe(inp)`: an episode is never part of its own baseline. An episode already in a
rolling window (by episode id) is not added again.

The file shape (`FileBaselines.load`, `to_json`; every field but `key` optional, null or
absent meaning unknown, which leaves the dimension that needs it unscored):

    {
      "version": 1,
      "source": "run:2024-06-01",
      "key_attrs": ["agent_id", "case_id"],
      "baselines": [
        {"key": {"agent_id": "support-bot", "case_id": "refund-1"},
         "cost_usd": 0.012, "latency_ms": 1800.0, "tool_names": ["search", "refund"],
         "outcome": "success", "step_count": 7, "episodes": 5}
      ]
    }

`RollingBaselines` serialises per key (`snapshot(key)` / `restore(obj)`, for a compacted
topic keyed by the baseline key) and as a whole (`to_json` / `from_json`).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort_right
from collections import Counter, OrderedDict, deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from evalstream.assertions.errors import InputError
from evalstream.assertions.scores.checks import (
    INTEGER,
    NUMBER,
    OPTIONAL_NUMBER,
    OPTIONAL_TEXT,
    TEXT,
    TEXTS,
    check_types,
)
from evalstream.assertions.scores.dimensions import OUTCOMES, ScoringInput
from evalstream.assertions.statistics import percentile, percentile_sorted

JSON = Any
DEFAULT_KEY_ATTRS: tuple[str, ...] = ("agent_id", "case_id")
FILE_VERSION = 1


class BaselineError(InputError):
    """A baseline, a baseline file or a baseline store setting is invalid."""


def _reject_unknown(obj: Mapping[str, Any], allowed: Collection[str], what: str) -> None:
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise BaselineError(
            f"unknown {what} {', '.join(unknown)}; valid: {', '.join(sorted(allowed))}"
        )


def _key_value(value: JSON) -> str | None:
    if value is None or isinstance(value, str):
        return value
    # Non-string attrs (a numeric case id) key by their canonical JSON text.
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def key_items(
    attrs: Mapping[str, JSON], names: Sequence[str]
) -> tuple[tuple[str, str | None], ...]:
    """`BaselineKey.of(attrs, names).items`, without the record (a lookup per scored episode)."""
    get = attrs.get
    items = []
    for name in names:
        value = get(name)
        # Strings and None are their own key values (the common case): no call.
        items.append((name, value if value is None or type(value) is str else _key_value(value)))
    return tuple(items)


@dataclass(frozen=True, slots=True)
class BaselineKey:
    """The values of the key attrs, in the order of `key_attrs` (None: attr absent)."""

    items: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, attrs: Mapping[str, JSON], names: Sequence[str] = DEFAULT_KEY_ATTRS) -> BaselineKey:
        return cls(key_items(attrs, names))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.items)

    def __str__(self) -> str:
        return ",".join(f"{k}={'null' if v is None else v}" for k, v in self.items)

    def to_json(self) -> dict[str, str | None]:
        return dict(self.items)

    @classmethod
    def from_json(cls, obj: JSON, names: Sequence[str]) -> BaselineKey:
        if not isinstance(obj, Mapping):
            raise BaselineError(f"a baseline key must be an object, got {obj!r}")
        unknown = sorted(set(obj) - set(names))
        if unknown:
            raise BaselineError(
                f"baseline key {dict(obj)!r} has attr(s) {', '.join(unknown)} not in the key "
                f"attrs {', '.join(names)}"
            )
        return cls.of(obj, names)


def _opt_number(obj: Mapping[str, JSON], name: str, where: str) -> float | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BaselineError(f"{where}: `{name}` must be a finite number, got {value!r}")
    if value < 0:
        raise BaselineError(f"{where}: `{name}` must be >= 0, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Baseline:
    """What one baseline key looked like; None fields are unknown.

    `source` names where it comes from (`run:<id>`, `file:<name>`, `rolling(last 20)`);
    `name` (source and key) is what score records carry.
    """

    key: BaselineKey
    source: str
    cost_usd: float | None = None
    latency_ms: float | None = None
    tool_names: tuple[str, ...] | None = None
    outcome: str | None = None
    step_count: float | None = None
    episodes: int = 1
    _name: str = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_name", f"{self.source} [{self.key}]")
        where = f"baseline {self.key}"
        for name in ("cost_usd", "latency_ms", "step_count"):
            _opt_number({name: getattr(self, name)}, name, where)
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise BaselineError(
                f"{where}: unknown outcome {self.outcome!r}; valid: {', '.join(sorted(OUTCOMES))}"
            )
        if (
            isinstance(self.episodes, bool)
            or not isinstance(self.episodes, int)
            or self.episodes < 1
        ):
            raise BaselineError(
                f"{where}: `episodes` must be an integer >= 1, got {self.episodes!r}"
            )

    @property
    def name(self) -> str:
        return self._name

    def covers(self, attrs: Mapping[str, JSON]) -> bool:
        # BaselineKey.of(attrs, names) == key, without building a key per scored episode.
        for name, value in self.key.items:
            given = attrs.get(name)
            # A string attr is its own key value: compare it before canonicalising.
            if given != value and _key_value(given) != value:
                return False
        return True

    def to_json(self) -> dict[str, JSON]:
        return {
            "key": self.key.to_json(),
            "source": self.source,
            "cost_usd": self.cost_usd,
            "latency_ms": self.latency_ms,
            "tool_names": None if self.tool_names is None else list(self.tool_names),
            "outcome": self.outcome,
            "step_count": self.step_count,
            "episodes": self.episodes,
        }

    @classmethod
    def from_json(
        cls, obj: JSON, names: Sequence[str] = DEFAULT_KEY_ATTRS, source: str | None = None
    ) -> Baseline:
        if not isinstance(obj, Mapping):
            raise BaselineError(f"a baseline must be an object, got {obj!r}")
        allowed = {
            "key",
            "source",
            "cost_usd",
            "latency_ms",
            "tool_names",
            "outcome",
            "step_count",
            "episodes",
        }
        _reject_unknown(obj, allowed, "baseline field(s)")
        if "key" not in obj:
            raise BaselineError(f"baseline {dict(obj)!r} has no `key`")
        key = BaselineKey.from_json(obj["key"], names)
        where = f"baseline {key}"
        check_types(obj, {"outcome": OPTIONAL_TEXT, "episodes": INTEGER}, where, BaselineError)
        tools = obj.get("tool_names")
        if tools is not None and (
            not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)
        ):
            raise BaselineError(f"{where}: `tool_names` must be a list of strings")
        name = source if source is not None else obj.get("source")
        if not isinstance(name, str) or not name:
            raise BaselineError(f"{where}: no `source` names where it comes from")
        episodes = obj.get("episodes", 1)
        return cls(
            key=key,
            source=name,
            cost_usd=_opt_number(obj, "cost_usd", where),
            latency_ms=_opt_number(obj, "latency_ms", where),
            tool_names=None if tools is None else tuple(tools),
            outcome=obj.get("outcome"),
            step_count=_opt_number(obj, "step_count", where),
            episodes=episodes,
        )


_ROLLING_FIELD_KINDS = {
    "window": INTEGER,
    "max_keys": INTEGER,
    "min_episodes": INTEGER,
    "key_attrs": TEXTS,
    "source": OPTIONAL_TEXT,
}
_ENTRY_FIELD_KINDS = {
    "outcome": TEXT,
    "step_count": INTEGER,
    "cost_usd": OPTIONAL_NUMBER,
    "latency_ms": NUMBER,
    "tool_names": TEXTS,
}


@dataclass(frozen=True, slots=True)
class BaselineEntry:
    """One episode as a baseline remembers it (cost None: the episode's cost was incomplete)."""

    episode_id: str
    cost_usd: float | None
    latency_ms: float
    tool_names: tuple[str, ...]
    outcome: str
    step_count: int

    @classmethod
    def of(cls, inp: ScoringInput) -> BaselineEntry:
        return cls(
            episode_id=inp.episode_id,
            cost_usd=inp.cost_usd if inp.cost_complete else None,
            latency_ms=inp.latency_ms,
            tool_names=inp.tool_names,
            outcome=inp.outcome,
            step_count=inp.step_count,
        )

    def to_json(self) -> dict[str, JSON]:
        return {
            "episode_id": self.episode_id,
            "cost_usd": self.cost_usd,
            "latency_ms": self.latency_ms,
            "tool_names": list(self.tool_names),
            "outcome": self.outcome,
            "step_count": self.step_count,
        }

    @classmethod
    def from_json(cls, obj: JSON) -> BaselineEntry:
        if not isinstance(obj, Mapping):
            raise BaselineError(f"a baseline entry must be an object, got {obj!r}")
        check_types(obj, _ENTRY_FIELD_KINDS, "baseline entry", BaselineError)
        try:
            inp = ScoringInput(
                episode_id=str(obj["episode_id"]),
                outcome=obj["outcome"],
                step_count=obj["step_count"],
                cost_usd=0.0 if obj.get("cost_usd") is None else obj["cost_usd"],
                cost_complete=obj.get("cost_usd") is not None,
                latency_ms=obj["latency_ms"],
                tool_names=tuple(obj.get("tool_names", ())),
            )
        except KeyError as exc:
            raise BaselineError(f"baseline entry {dict(obj)!r} misses {exc}") from exc
        except InputError as exc:
            raise BaselineError(f"baseline entry: {exc}") from exc
        return cls.of(inp)


def _most_recent_mode(values_newest_first: Sequence[Any]) -> Any:
    """The most frequent value; among equally frequent ones, the most recent."""
    counts = Counter(values_newest_first)
    best = max(counts.values())
    return next(v for v in values_newest_first if counts[v] == best)


def summarise(key: BaselineKey, source: str, entries: Sequence[BaselineEntry]) -> Baseline:
    """The robust summary of entries (oldest first): medians, modal tools, majority outcome.

    Medians interpolate (the mean of the two middle values for an even count). Cost is the
    median over the entries whose cost is known (None if none is).
    """
    if not entries:
        raise BaselineError(f"baseline {key}: no episodes to summarise")
    costs = [e.cost_usd for e in entries if e.cost_usd is not None]
    newest_first = entries[::-1]
    return Baseline(
        key=key,
        source=source,
        cost_usd=percentile(costs, 50.0) if costs else None,
        latency_ms=percentile([e.latency_ms for e in entries], 50.0),
        tool_names=_most_recent_mode([e.tool_names for e in newest_first]),
        outcome=_most_recent_mode([e.outcome for e in newest_first]),
        step_count=percentile([float(e.step_count) for e in entries], 50.0),
        episodes=len(entries),
    )


class _KeyWindow:
    """One key's last `window` entries (oldest first) and what `summarise` reads of them, kept
    up to date as entries come and go: the costs, latencies and step counts sorted (a stable
    sort of the arrival order, as `sorted` gives), the tool sequences and outcomes counted.
    A rolling baseline changes by one entry per scored episode, and is read before the next."""

    __slots__ = ("costs", "entries", "ids", "latencies", "outcomes", "steps", "tools", "window")

    def __init__(self, window: int) -> None:
        self.window = window
        self.entries: deque[BaselineEntry] = deque()
        self.ids: set[str] = set()
        self.costs: list[float] = []
        self.latencies: list[float] = []
        self.steps: list[float] = []
        self.tools: Counter[tuple[str, ...]] = Counter()
        self.outcomes: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entry: BaselineEntry) -> bool:
        """Append `entry`, evicting the oldest beyond `window`; False if its episode is in."""
        if entry.episode_id in self.ids:
            return False
        if len(self.entries) >= self.window:
            old = self.entries.popleft()
            self.ids.discard(old.episode_id)
            if old.cost_usd is not None:  # the oldest of the values equal to it comes first
                del self.costs[bisect_left(self.costs, old.cost_usd)]
            del self.latencies[bisect_left(self.latencies, old.latency_ms)]
            del self.steps[bisect_left(self.steps, float(old.step_count))]
            _uncount(self.tools, old.tool_names)
            _uncount(self.outcomes, old.outcome)
        self.entries.append(entry)
        self.ids.add(entry.episode_id)
        if entry.cost_usd is not None:
            insort_right(self.costs, entry.cost_usd)
        insort_right(self.latencies, entry.latency_ms)
        insort_right(self.steps, float(entry.step_count))
        self.tools[entry.tool_names] += 1
        self.outcomes[entry.outcome] += 1
        return True

    def summary(self, key: BaselineKey, source: str) -> Baseline:
        """`summarise(key, source, entries)`, from the kept orders and counts."""
        entries = self.entries
        return Baseline(
            key=key,
            source=source,
            cost_usd=percentile_sorted(self.costs, 50.0) if self.costs else None,
            latency_ms=percentile_sorted(self.latencies, 50.0),
            tool_names=_counted_mode(self.tools, (e.tool_names for e in reversed(entries))),
            outcome=_counted_mode(self.outcomes, (e.outcome for e in reversed(entries))),
            step_count=percentile_sorted(self.steps, 50.0),
            episodes=len(self.entries),
        )


def _uncount(counts: Counter[Any], value: Any) -> None:
    if counts[value] == 1:
        del counts[value]
    else:
        counts[value] -= 1


def _counted_mode(counts: Counter[Any], values_newest_first: Iterable[Any]) -> Any:
    """`_most_recent_mode` with the values already counted."""
    best = max(counts.values())
    return next(v for v in values_newest_first if counts[v] == best)


class BaselineStore(Protocol):
    """Where scoring finds baselines. Call `get` before `observe` for the same episode."""

    @property
    def key_attrs(self) -> tuple[str, ...]: ...

    def key_for(self, attrs: Mapping[str, JSON]) -> BaselineKey: ...

    def get(self, key: BaselineKey) -> Baseline | None: ...

    def baseline_for(self, attrs: Mapping[str, JSON]) -> Baseline | None:
        """`get(key_for(attrs))`, the way each scored episode looks its baseline up."""
        ...

    def observe(self, inp: ScoringInput) -> None: ...


def _check_key_attrs(key_attrs: Sequence[str]) -> tuple[str, ...]:
    names = tuple(key_attrs)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise BaselineError(f"key_attrs must be a non-empty list of attr names, got {key_attrs!r}")
    if len(set(names)) != len(names):
        raise BaselineError(f"key_attrs repeat a name: {list(names)!r}")
    return names


class FileBaselines:
    """Fixed baselines (an explicit baseline run or a file); `observe` changes nothing."""

    def __init__(
        self, baselines: Iterable[Baseline], key_attrs: Sequence[str] = DEFAULT_KEY_ATTRS
    ) -> None:
        self._key_attrs = _check_key_attrs(key_attrs)
        self._baselines: dict[BaselineKey, Baseline] = {}
        for baseline in baselines:
            if baseline.key.names != self._key_attrs:
                raise BaselineError(
                    f"baseline {baseline.key} is keyed by {', '.join(baseline.key.names)}, "
                    f"not {', '.join(self._key_attrs)}"
                )
            if baseline.key in self._baselines:
                raise BaselineError(f"two baselines for key {baseline.key}")
            self._baselines[baseline.key] = baseline
        # The same map keyed by the keys' items: a plain tuple hashes and compares in C, a
        # BaselineKey through its generated Python __hash__ and __eq__ (`get` runs per episode).
        self._by_items = {key.items: baseline for key, baseline in self._baselines.items()}

    @property
    def key_attrs(self) -> tuple[str, ...]:
        return self._key_attrs

    def key_for(self, attrs: Mapping[str, JSON]) -> BaselineKey:
        return BaselineKey.of(attrs, self._key_attrs)

    def get(self, key: BaselineKey) -> Baseline | None:
        return self._by_items.get(key.items)

    def baseline_for(self, attrs: Mapping[str, JSON]) -> Baseline | None:
        return self._by_items.get(key_items(attrs, self._key_attrs))

    def observe(self, inp: ScoringInput) -> None:
        """A fixed baseline does not learn from the episodes it scores."""

    def __len__(self) -> int:
        return len(self._baselines)

    def baselines(self) -> list[Baseline]:
        return list(self._baselines.values())

    @classmethod
    def from_results(
        cls,
        inputs: Iterable[ScoringInput],
        *,
        source: str,
        key_attrs: Sequence[str] = DEFAULT_KEY_ATTRS,
        run_id: str | None = None,
        run_attr: str = "run_id",
    ) -> FileBaselines:
        """Baselines from an explicit baseline run: per key, the robust summary (as a rolling
        baseline computes it) of the episodes given, in order — only those whose
        `attrs[run_attr] == run_id` when `run_id` is set."""
        names = _check_key_attrs(key_attrs)
        groups: dict[BaselineKey, list[BaselineEntry]] = {}
        for inp in inputs:
            if run_id is not None and inp.attrs.get(run_attr) != run_id:
                continue
            groups.setdefault(BaselineKey.of(inp.attrs, names), []).append(BaselineEntry.of(inp))
        return cls((summarise(k, source, v) for k, v in groups.items()), names)

    def to_json(self) -> dict[str, JSON]:
        return {
            "version": FILE_VERSION,
            "key_attrs": list(self._key_attrs),
            "baselines": [b.to_json() for b in self._baselines.values()],
        }

    @classmethod
    def from_json(cls, obj: JSON, default_source: str = "file") -> FileBaselines:
        """Read the documented shape; a baseline without its own `source` takes the file's
        `source`, else `default_source`."""
        if not isinstance(obj, Mapping):
            raise BaselineError("a baseline file must hold a JSON object")
        allowed = {"version", "source", "key_attrs", "baselines"}
        _reject_unknown(obj, allowed, "baseline file field(s)")
        version = obj.get("version", FILE_VERSION)
        if version != FILE_VERSION:
            raise BaselineError(f"baseline file version {version!r} is not supported (only 1)")
        names = _check_key_attrs(obj.get("key_attrs", DEFAULT_KEY_ATTRS))
        items = obj.get("baselines")
        if not isinstance(items, list):
            raise BaselineError("a baseline file needs a `baselines` list")
        file_source = obj.get("source", default_source)
        if not isinstance(file_source, str) or not file_source:
            raise BaselineError(f"`source` must be a non-empty string, got {file_source!r}")
        baselines = []
        for i, item in enumerate(items):
            own = item.get("source") if isinstance(item, Mapping) else None
            try:
                baselines.append(Baseline.from_json(item, names, own or file_source))
            except BaselineError as exc:
                raise BaselineError(f"baselines[{i}]: {exc}") from exc
        return cls(baselines, names)

    @classmethod
    def load(cls, path: str | Path) -> FileBaselines:
        """Load a baseline file; errors name the file. Default source: `file:<file name>`."""
        p = Path(path)
        try:
            obj = orjson.loads(p.read_bytes())
        except OSError as exc:
            raise BaselineError(f"{p}: cannot read the baseline file: {exc.strerror}") from exc
        except orjson.JSONDecodeError as exc:
            raise BaselineError(f"{p}: not valid JSON: {exc}") from exc
        try:
            return cls.from_json(obj, default_source=f"file:{p.name}")
        except BaselineError as exc:
            raise BaselineError(f"{p}: {exc}") from exc


class RollingBaselines:
    """Per key, the last `window` episodes; a baseline once `min_episodes` were seen."""

    def __init__(
        self,
        window: int = 20,
        *,
        max_keys: int = 10_000,
        min_episodes: int = 5,
        key_attrs: Sequence[str] = DEFAULT_KEY_ATTRS,
        source: str | None = None,
    ) -> None:
        for name, value in (
            ("window", window),
            ("max_keys", max_keys),
            ("min_episodes", min_episodes),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise BaselineError(f"`{name}` must be an integer, got {value!r}")
        if window < 1:
            raise BaselineError(f"a rolling baseline window must be >= 1, got {window}")
        if max_keys < 1:
            raise BaselineError(f"max_keys must be >= 1, got {max_keys}")
        if not 1 <= min_episodes <= window:
            raise BaselineError(
                f"min_episodes must be within [1, window={window}], got {min_episodes}"
            )
        self.window = window
        self.max_keys = max_keys
        self.min_episodes = min_episodes
        self._key_attrs = _check_key_attrs(key_attrs)
        self.source = source or f"rolling(last {window})"
        self._entries: OrderedDict[BaselineKey, _KeyWindow] = OrderedDict()
        self._summaries: dict[BaselineKey, Baseline] = {}  # cleared per key on observe
        self.evicted = 0

    @property
    def key_attrs(self) -> tuple[str, ...]:
        return self._key_attrs

    def key_for(self, attrs: Mapping[str, JSON]) -> BaselineKey:
        return BaselineKey.of(attrs, self._key_attrs)

    def __len__(self) -> int:
        return len(self._entries)

    def baseline_for(self, attrs: Mapping[str, JSON]) -> Baseline | None:
        return self.get(self.key_for(attrs))

    def get(self, key: BaselineKey) -> Baseline | None:
        entries = self._entries.get(key)
        if entries is None or len(entries) < self.min_episodes:
            return None
        self._entries.move_to_end(key)
        summary = self._summaries.get(key)
        if summary is None:
            summary = self._summaries[key] = entries.summary(key, self.source)
        return summary

    def observe(self, inp: ScoringInput) -> None:
        self._add(self.key_for(inp.attrs), BaselineEntry.of(inp))

    def _add(self, key: BaselineKey, entry: BaselineEntry) -> None:
        entries = self._entries.get(key)
        if entries is None:
            entries = self._entries[key] = _KeyWindow(self.window)
            while len(self._entries) > self.max_keys:
                old, _ = self._entries.popitem(last=False)
                self._summaries.pop(old, None)
                self.evicted += 1
        else:
            self._entries.move_to_end(key)
        # Re-scoring an episode (a re-run window, a redelivery) must not count it twice.
        if entries.add(entry):
            self._summaries.pop(key, None)

    # --- serialisation --------------------------------------------------------------------

    def snapshot(self, key: BaselineKey) -> dict[str, JSON] | None:
        """One key's window as JSON (the value of a compacted-topic record for that key)."""
        entries = self._entries.get(key)
        if entries is None:
            return None
        return {"key": key.to_json(), "entries": [e.to_json() for e in entries.entries]}

    def restore(self, obj: JSON) -> BaselineKey:
        """Load one key's window from `snapshot` JSON, replacing what the key held."""
        if not isinstance(obj, Mapping) or "key" not in obj:
            raise BaselineError("a rolling baseline snapshot needs `key` and `entries`")
        key = BaselineKey.from_json(obj["key"], self._key_attrs)
        items = obj.get("entries")
        if not isinstance(items, list):
            raise BaselineError(f"rolling baseline {key}: `entries` must be a list")
        self._entries.pop(key, None)
        self._summaries.pop(key, None)
        for item in items[-self.window :]:
            self._add(key, BaselineEntry.from_json(item))
        return key

    def to_json(self) -> dict[str, JSON]:
        return {
            "window": self.window,
            "max_keys": self.max_keys,
            "min_episodes": self.min_episodes,
            "key_attrs": list(self._key_attrs),
            "source": self.source,
            "keys": [self.snapshot(k) for k in self._entries],  # least recently used first
        }

    @classmethod
    def from_json(cls, obj: JSON) -> RollingBaselines:
        if not isinstance(obj, Mapping):
            raise BaselineError("rolling baselines must be a JSON object")
        check_types(obj, _ROLLING_FIELD_KINDS, "rolling baselines:", BaselineError)
        store = cls(
            obj.get("window", 20),
            max_keys=obj.get("max_keys", 10_000),
            min_episodes=obj.get("min_episodes", 5),
            key_attrs=obj.get("key_attrs", DEFAULT_KEY_ATTRS),
            source=obj.get("source"),
        )
        keys = obj.get("keys", [])
        if not isinstance(keys, list):
            raise BaselineError(f"rolling baselines: `keys` must be a list, got {keys!r}")
        for item in keys:
            store.restore(item)
        return store
