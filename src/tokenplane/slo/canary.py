"""The canary guard: roll a version split back to the stable version when the canary
clearly does worse, judged on an SLO's SLIs over one window for both versions.

For each SLI of the guarding SLO, over the last ``window``:

1. the canary needs ``min_requests`` valid events before anything is decided;
2. it is rolled back at once if its burn rate reaches ``burn_limit`` (it would spend
   the error budget within ``window / burn_limit`` of the SLO's window: 14.4x by
   default, the fast page's rate);
3. otherwise it is rolled back when it errs clearly faster than the stable version:
   a one-sided two-proportion z-test says its bad share exceeds the stable one's with
   ``confidence`` (0.999 by default: the guard looks again every round, so a looser
   level would roll back healthy canaries by chance over a day), the stable version
   has ``min_requests`` of its own, and the canary burns faster than 1x (a difference
   that still fits the budget is not worth a rollback).

The decision carries its evidence (counts, rates, z, p) so it can be recorded and
sent. Pure: tallies and ``now`` in, a decision out."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenplane.config.routing_schema import SplitGuardConfig
from tokenplane.slo.budget import burn_rate
from tokenplane.slo.tally import Tally


@dataclass(frozen=True, slots=True)
class CanaryGuardSpec:
    alias: str
    slo: str
    stable: str
    canary: str
    window_s: float = 3600.0
    min_requests: int = 100
    confidence: float = 0.999
    burn_limit: float = 14.4


@dataclass(frozen=True, slots=True)
class CanaryVerdict:
    rollback: bool
    reason: str
    sli: str
    canary: Tally
    stable: Tally
    canary_burn: float
    stable_burn: float
    z: float | None = None
    p_value: float | None = None

    def evidence(self) -> dict[str, object]:
        return {
            "sli": self.sli, "reason": self.reason,
            "canary": {"valid": self.canary.valid, "bad": self.canary.bad,
                       "burn_rate": self.canary_burn},
            "stable": {"valid": self.stable.valid, "bad": self.stable.bad,
                       "burn_rate": self.stable_burn},
            "z": self.z, "p_value": self.p_value,
        }


def one_sided_p(canary: Tally, stable: Tally) -> tuple[float | None, float | None]:
    """z and the p-value of "the canary's bad share is higher" (None when undefined)."""
    n1, n2 = canary.valid, stable.valid
    if n1 == 0 or n2 == 0:
        return None, None
    p1, p2 = canary.bad / n1, stable.bad / n2
    pooled = (canary.bad + stable.bad) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return None, None
    z = (p1 - p2) / se
    return z, 0.5 * math.erfc(z / math.sqrt(2))


def judge(
    spec: CanaryGuardSpec, objective: float, sli: str, canary: Tally, stable: Tally
) -> CanaryVerdict:
    cb, sb = burn_rate(canary, objective), burn_rate(stable, objective)

    def verdict(rollback: bool, reason: str, z: float | None = None,
                p: float | None = None) -> CanaryVerdict:
        return CanaryVerdict(rollback, reason, sli, canary, stable, cb, sb, z, p)

    if canary.valid < spec.min_requests:
        return verdict(False, f"waiting for {spec.min_requests} canary events "
                              f"({canary.valid} so far)")
    if cb >= spec.burn_limit:
        return verdict(True, f"the canary burns its error budget at {cb:.1f}x "
                             f"(limit {spec.burn_limit:g}x)")
    z, p = one_sided_p(canary, stable)
    if stable.valid < spec.min_requests or z is None or p is None:
        return verdict(False, "not enough stable events to compare", z, p)
    if p < 1 - spec.confidence and cb > 1.0:
        return verdict(True, f"the canary errs faster than stable ({canary.bad}/"
                             f"{canary.valid} vs {stable.bad}/{stable.valid}, "
                             f"p={p:.2g}) and burns {cb:.1f}x", z, p)
    return verdict(False, "the canary holds", z, p)


def guard_spec(alias: str, cfg: SplitGuardConfig) -> CanaryGuardSpec:
    """A split's ``guard:`` config as the policy's spec."""
    return CanaryGuardSpec(
        alias=alias, slo=cfg.slo, stable=cfg.stable, canary=cfg.canary,
        window_s=cfg.window, min_requests=cfg.min_requests, confidence=cfg.confidence,
        burn_limit=cfg.burn_limit,
    )
