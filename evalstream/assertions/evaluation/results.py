"""Episode results and the stable JSON contract of `evalstream check --format json`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from evalstream.assertions.evaluation.facts import EpisodeMetrics
from evalstream.assertions.evaluation.verdicts import Verdict

if TYPE_CHECKING:  # the engine is imported only where assertions run
    from evalstream.assertions.evaluation.engine import AssertionOutcome

JSON = Any
OUTPUT_PREVIEW_CHARS = 2000
ERROR_MESSAGE_CHARS = 500


def describe_error(exc: BaseException) -> str:
    """`Type: message` of an exception, bounded: what an `error` episode reports."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= ERROR_MESSAGE_CHARS else text[: ERROR_MESSAGE_CHARS - 1] + "…"


def iso_ms(ts: float | None) -> str | None:
    """Epoch milliseconds -> `YYYY-MM-DDTHH:MM:SS.mmmZ` (as datetime formats it)."""
    if ts is None:
        return None
    if not 0.0 <= ts < _FAST_UNTIL_MS:  # also NaN
        return _iso_ms_datetime(ts)
    # datetime.fromtimestamp's own rounding (half-even to the microsecond), then the
    # seconds prefix from a cache: one datetime per distinct second, not per verdict.
    frac, whole = math.modf(ts / 1000.0)
    micros = round(frac * 1e6)
    seconds = int(whole)
    if micros >= 1_000_000:
        seconds += 1
        micros -= 1_000_000
    prefix = _ISO_SECONDS.get(seconds)
    if prefix is None:
        if len(_ISO_SECONDS) >= 65_536:
            _ISO_SECONDS.clear()
        prefix = _ISO_SECONDS[seconds] = datetime.fromtimestamp(seconds, tz=UTC).isoformat()[:19]
    return f"{prefix}.{micros // 1000:03d}Z"


_FAST_UNTIL_MS = 4_102_444_800_000.0  # 2100-01-01: four-digit years, no edge of the range
_ISO_SECONDS: dict[int, str] = {}


def _iso_ms_datetime(ts: float) -> str:
    return (
        datetime.fromtimestamp(ts / 1000.0, tz=UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


@dataclass
class EpisodeResult:
    episode_id: str
    case_id: str | None
    close_reason: str
    signals: int
    duplicates: int
    assertions: list[AssertionOutcome]
    metrics: EpisodeMetrics
    attrs: dict[str, JSON] = field(default_factory=dict)
    suites: list[str] = field(default_factory=list)
    started_ts: float | None = None
    ended_ts: float | None = None
    output: str | None = None
    notes: list[str] = field(default_factory=list)
    # Closing, evaluating or reporting this episode raised: what, as `describe_error` says.
    error: str | None = None

    @property
    def evaluated(self) -> bool:
        return bool(self.assertions)

    @property
    def status(self) -> str:
        """passed | failed | error | unevaluated (no assertion applied)."""
        if self.error is not None:
            return "error"
        if not self.assertions:
            return "unevaluated"
        verdicts = {a.verdict for a in self.assertions}
        if Verdict.FAIL in verdicts:
            return "failed"
        if Verdict.ERROR in verdicts or Verdict.PENDING in verdicts:
            return "error"
        return "passed"

    @property
    def passed(self) -> bool | None:
        """True only when every applicable assertion passed; None when none applied."""
        status = self.status
        return None if status == "unevaluated" else status == "passed"

    def reported(self) -> EpisodeResult:
        """This result, checked to render (`to_json`); when rendering raises, the episode as
        status `error` (as `ClosedEpisode.report` gives it)."""
        try:
            self.to_json()
        except Exception as exc:  # any failure is this episode's alone
            return error_result(
                self.episode_id,
                case_id=self.case_id,
                close_reason=self.close_reason,
                signals=self.signals,
                duplicates=self.duplicates,
                attrs=self.attrs,
                error=describe_error(exc),
            )
        return self

    def to_json(self) -> dict[str, JSON]:
        output = self.output
        if output is not None and len(output) > OUTPUT_PREVIEW_CHARS:
            output = output[:OUTPUT_PREVIEW_CHARS] + "…"
        status = self.status  # `passed`, from the same status
        out = {
            "episode_id": self.episode_id,
            "case_id": self.case_id,
            "passed": None if status == "unevaluated" else status == "passed",
            "status": status,
            "close_reason": self.close_reason,
            "signals": self.signals,
            "duplicates": self.duplicates,
            "suites": self.suites,
            "started_at": iso_ms(self.started_ts),
            "ended_at": iso_ms(self.ended_ts),
            "attrs": self.attrs,
            "metrics": self.metrics.to_json(),
            "output": output,
            "notes": self.notes,
            "assertions": [a.to_json() for a in self.assertions],
        }
        if self.error is not None:  # only then: the contract of every other episode is kept
            out["error"] = self.error
        return out


@dataclass
class Summary:
    episodes: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    unevaluated: int = 0
    rejected_signals: int = 0
    duplicates: int = 0
    late_signals: int = 0

    @staticmethod
    def of(results: list[EpisodeResult]) -> Summary:
        s = Summary(episodes=len(results))
        for r in results:
            status = r.status
            if status == "passed":
                s.passed += 1
            elif status == "failed":
                s.failed += 1
            elif status == "error":
                s.errors += 1
            else:
                s.unevaluated += 1
            s.duplicates += r.duplicates
        return s

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.errors == 0

    def to_json(self) -> dict[str, int]:
        return {
            "episodes": self.episodes,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "unevaluated": self.unevaluated,
            "rejected_signals": self.rejected_signals,
            "duplicates": self.duplicates,
            "late_signals": self.late_signals,
        }


def error_result(
    episode_id: str,
    *,
    case_id: str | None,
    close_reason: str,
    signals: int,
    duplicates: int,
    attrs: Mapping[str, JSON],
    error: str,
) -> EpisodeResult:
    """An episode as status `error`: only what cannot fail to render (its id, case, close
    reason, counts, attributes), none of its evaluation."""
    return EpisodeResult(
        episode_id=episode_id,
        case_id=case_id,
        close_reason=close_reason,
        signals=signals,
        duplicates=duplicates,
        assertions=[],
        metrics=EpisodeMetrics(),
        attrs=dict(attrs),
        error=error,
    )
