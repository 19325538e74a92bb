"""Threshold profiles of the eval-harness methodology ("Common Thresholds") and the gate that
checks a run.

| profile     | pass@1 | pass@k | pass^k |
|-------------|--------|--------|--------|
| development | 0.70   | 0.90   | 0.50   |
| staging     | 0.80   | 0.95   | 0.65   |
| production  | 0.90   | 0.99   | 0.80   |
| critical    | 0.95   | 0.999  | 0.90   |

pass^k is checked with the eval-harness definition, (c/n)^k, unless `pass_hat="unbiased"` asks for
C(c, k) / C(n, k). A metric that is undefined for the run (pass@k with fewer than k samples per
case) is reported as `undefined` with the reason; it does not fail the gate, and the report
says it was not checked.
"""

from __future__ import annotations

from typing import Literal

from evalstream.assertions.errors import InputError
from evalstream.assertions.evalruns.models import DatasetResult, Model

PassHat = Literal["simple", "unbiased"]
CheckStatus = Literal["pass", "fail", "undefined"]


class ThresholdProfile(Model):
    name: str
    pass_at_1: float
    pass_at_k: float
    pass_hat_k: float


PROFILES: dict[str, ThresholdProfile] = {
    p.name: p
    for p in (
        ThresholdProfile(name="development", pass_at_1=0.70, pass_at_k=0.90, pass_hat_k=0.50),
        ThresholdProfile(name="staging", pass_at_1=0.80, pass_at_k=0.95, pass_hat_k=0.65),
        ThresholdProfile(name="production", pass_at_1=0.90, pass_at_k=0.99, pass_hat_k=0.80),
        ThresholdProfile(name="critical", pass_at_1=0.95, pass_at_k=0.999, pass_hat_k=0.90),
    )
}


def profile(name: str) -> ThresholdProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise InputError(
            f"unknown threshold profile {name!r}; valid profiles: {', '.join(PROFILES)}"
        ) from None


class ProfileRow(Model):
    metric: str
    value: float | None
    threshold: float
    status: CheckStatus
    note: str | None = None


class ProfileCheck(Model):
    profile: str
    k: int
    pass_hat: PassHat
    rows: list[ProfileRow]

    @property
    def passed(self) -> bool:
        return all(r.status != "fail" for r in self.rows)

    def failures(self) -> list[ProfileRow]:
        return [r for r in self.rows if r.status == "fail"]

    def describe_failures(self) -> str:
        return "; ".join(
            f"{r.metric} {r.value:.3f} < {r.threshold:g}"
            for r in self.failures()
            if r.value is not None
        )


def check_profile(
    result: DatasetResult, chosen: ThresholdProfile, *, pass_hat: PassHat = "simple"
) -> ProfileCheck:
    pm = result.pass_metrics
    k = pm.k
    hat_value = pm.pass_hat_k_seed if pass_hat == "simple" else pm.pass_hat_k_unbiased
    hat_label = (
        f"pass^{k} (eval-harness: (c/n)^k)"
        if pass_hat == "simple"
        else (f"pass^{k} (unbiased: C(c,k)/C(n,k))")
    )
    rows = [
        _row("pass@1", pm.pass_at_1, chosen.pass_at_1, pm.undefined_reason),
        _row(f"pass@{k}", pm.pass_at_k, chosen.pass_at_k, pm.undefined_reason),
        _row(hat_label, hat_value, chosen.pass_hat_k, pm.undefined_reason),
    ]
    return ProfileCheck(profile=chosen.name, k=k, pass_hat=pass_hat, rows=rows)


def _row(metric: str, value: float | None, threshold: float, why: str | None) -> ProfileRow:
    if value is None:
        return ProfileRow(
            metric=metric, value=None, threshold=threshold, status="undefined", note=why
        )
    return ProfileRow(
        metric=metric,
        value=value,
        threshold=threshold,
        status="pass" if value >= threshold else "fail",
    )
