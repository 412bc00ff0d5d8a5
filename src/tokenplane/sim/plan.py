"""Capacity planning with the simulator: replicas needed per hour of the day.

The workload (a trace or the ledger's recorded requests) is cut into hours of the day
(UTC for recorded traffic; a trace's first second is hour ``start_hour``). For each
hour of the day the busiest instance of it (most tokens) stands for it, so a plan for
seven days covers each hour's worst day. Its requests, rebased to start at 0 and
compressed by the growth factor (1.3 = 30% more requests per second), run through
the default routing profile and gateway queue (what a default config serves) on
``R`` simulated replicas. ``needed`` is the least ``R`` whose run meets every SLO of
the target (each SLI at or above its objective), found by bisection between a count
that fails and one that passes, so ``needed - 1`` was simulated and failed.
``recommended`` adds the headroom: ``ceil(needed * (1 + headroom))``.

Scenarios answer "what if": another engine profile, another growth, prefix caching
off (requests carry no prefix fingerprints, so no replica reuses another's KV).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from tokenplane.engine.profiles import EngineProfile
from tokenplane.routing.profiles import DEFAULT_PROFILE
from tokenplane.scheduling.slo import SloClass
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, builtin_policies
from tokenplane.sim.slo_results import slo_results
from tokenplane.sim.workload import SimRequest
from tokenplane.slo.spec import Slo

HOUR_S = 3600.0
DAY_S = 86400.0
DAYS_PER_MONTH = Decimal("30.4375")  # 365.25 / 12
HOURS_PER_DAY = 24


@dataclass(frozen=True, slots=True)
class Target:
    """What every planned hour must meet: each SLO's SLIs at their objectives, judged
    on requests of model ``alias`` with these SLO classes."""

    slos: tuple[Slo, ...]
    classes: Mapping[str, SloClass]
    alias: str = "sim"


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    profile: EngineProfile
    growth: float = 1.0
    prefix_cache: bool = True

    def __post_init__(self) -> None:
        if not self.growth > 0:
            raise ValueError("growth must be positive")


@dataclass(frozen=True, slots=True)
class Probe:
    replicas: int
    met: bool
    slis: Mapping[str, float]  # "slo/sli" -> SLI of the run


@dataclass(frozen=True, slots=True)
class HourPlan:
    hour: int
    requests: int
    rate_rps: float
    tokens_per_s: float
    needed: int
    recommended: int
    probes: tuple[Probe, ...]


def hour_buckets(
    reqs: Sequence[SimRequest], *, epoch: bool, start_hour: int = 0
) -> dict[int, list[SimRequest]]:
    """Hour of the day -> the requests of its busiest instance (by prompt plus output
    tokens), arrivals rebased to the start of that hour. ``epoch``: arrivals are epoch
    seconds (UTC hours); else seconds from the trace's start, which is ``start_hour``."""
    instances: dict[int, list[SimRequest]] = {}
    for r in reqs:
        t = r.arrival if epoch else r.arrival + start_hour * HOUR_S
        instances.setdefault(int(t // HOUR_S), []).append(r)
    best: dict[int, tuple[int, int, list[SimRequest]]] = {}
    for idx, rs in instances.items():
        hour = idx % 24
        tokens = sum(r.prompt_tokens + r.output_tokens for r in rs)
        base = idx * HOUR_S - (0.0 if epoch else start_hour * HOUR_S)
        rebased = [replace(r, arrival=max(0.0, r.arrival - base)) for r in rs]
        if hour not in best or tokens > best[hour][0]:
            best[hour] = (tokens, idx, rebased)
    return {h: v[2] for h, v in sorted(best.items())}


def scenario_workload(reqs: Sequence[SimRequest], sc: Scenario) -> list[SimRequest]:
    """The hour's requests under the scenario: ``growth`` times the rate, and no prefix
    fingerprints when prefix caching is off."""
    out = [replace(r, arrival=r.arrival / sc.growth) for r in reqs]
    if not sc.prefix_cache:
        out = [replace(r, block_hashes=()) for r in out]
    return out


def run_hour(reqs: Sequence[SimRequest], sc: Scenario, target: Target, replicas: int,
             seed: int = 0) -> Probe:
    """One simulated run of the hour on ``replicas`` replicas, judged on the target."""
    sim = ClusterSim(builtin_policies()[DEFAULT_PROFILE], sc.profile, target.classes,
                     ClusterConfig(replicas=replicas, seed=seed, fast_decode=True,
                                   idle_ticks=False),
                     alias=target.alias)
    sim.run(reqs)
    res = slo_results(target.slos, list(sim.records.values()), target.alias)
    slis = {f"{slo}/{sli}": float(v["sli"]) for slo, per in res.items()
            for sli, v in per.items()}
    met = all(v["met"] for per in res.values() for v in per.values())
    return Probe(replicas, met, slis)


def estimate_replicas(reqs: Sequence[SimRequest], profile: EngineProfile) -> int:
    """A first guess from the step-time model: the engine-seconds of prefill and decode
    the hour asks for, over its span, at 70% busy (a lower bound in practice)."""
    if not reqs:
        return 1
    span = max(1.0, max(r.arrival for r in reqs) - min(r.arrival for r in reqs))
    work = sum(r.prompt_tokens + r.output_tokens for r in reqs) * profile.a_s_per_token
    return max(1, math.ceil(work / span / 0.7))


def replicas_needed(
    reqs: Sequence[SimRequest], sc: Scenario, target: Target, *, max_replicas: int = 256,
    seed: int = 0, run: Callable[..., Probe] = run_hour,
) -> tuple[int, tuple[Probe, ...]]:
    """The least replica count that meets the target, and every probe run. Raises
    ValueError when even ``max_replicas`` does not."""
    probes: dict[int, Probe] = {}

    def probe(n: int) -> bool:
        if n not in probes:
            probes[n] = run(reqs, sc, target, n, seed)
        return probes[n].met

    hi = min(max_replicas, estimate_replicas(reqs, sc.profile))
    while not probe(hi):
        if hi >= max_replicas:
            raise ValueError(f"{max_replicas} replicas do not meet the target")
        hi = min(max_replicas, hi * 2)
    lo = 0  # 0 replicas fail by definition
    below = [n for n, p in probes.items() if not p.met and n < hi]
    if below:
        lo = max(below)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe(mid):
            hi = mid
        else:
            lo = mid
    return hi, tuple(probes[n] for n in sorted(probes))


def plan_scenario(
    buckets: Mapping[int, Sequence[SimRequest]], sc: Scenario, target: Target, *,
    headroom: float, price_per_replica_hour: Decimal | None, max_replicas: int = 256,
    seed: int = 0, progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Per hour of the day: needed and recommended replicas; the peak; monthly cost."""
    if headroom < 0:
        raise ValueError("headroom must be >= 0")
    hours: list[HourPlan] = []
    for hour, reqs in buckets.items():
        wl = scenario_workload(reqs, sc)
        needed, probes = replicas_needed(wl, sc, target, max_replicas=max_replicas, seed=seed)
        span = HOUR_S / sc.growth
        hours.append(HourPlan(
            hour, len(wl), len(wl) / span,
            sum(r.prompt_tokens + r.output_tokens for r in wl) / span,
            needed, math.ceil(needed * (1.0 + headroom) - 1e-9), probes,
        ))
        if progress is not None:
            progress(sc.name, hour, needed)
    peak = max(hours, key=lambda h: h.recommended) if hours else None
    out: dict[str, Any] = {
        "profile": sc.profile.name, "growth": sc.growth, "prefix_cache": sc.prefix_cache,
        "headroom": headroom,
        "hours": [_hour_json(h) for h in hours],
        "peak": None if peak is None else {"hour": peak.hour, "needed": peak.needed,
                                           "recommended": peak.recommended},
        # a day has 24 hours whatever the workload covered: hours it did not cover are
        # priced at the covered hours' average (a 1-hour trace is one hour of 24)
        "hours_observed": sorted(h.hour for h in hours),
        "replica_hours_observed": sum(h.recommended for h in hours),
        "replica_hours_per_day": float(_per_day(hours)),
        "hours_covered": len(hours),
        "cost_basis": _basis(hours),
    }
    if price_per_replica_hour is not None:
        day = _per_day(hours) * price_per_replica_hour
        out["price_per_replica_hour"] = str(price_per_replica_hour)
        out["cost_per_month"] = str((day * DAYS_PER_MONTH).quantize(Decimal("0.01")))
        if peak is not None:
            static = peak.recommended * HOURS_PER_DAY * price_per_replica_hour * DAYS_PER_MONTH
            out["cost_per_month_static_at_peak"] = str(static.quantize(Decimal("0.01")))
    return out


def _per_day(hours: Sequence[HourPlan]) -> Decimal:
    """Replica-hours of a whole day: the covered hours' own, and each hour the workload
    did not cover at their average."""
    if not hours:
        return Decimal(0)
    covered = sum(h.recommended for h in hours)
    return Decimal(covered) * HOURS_PER_DAY / len(hours)


def _basis(hours: Sequence[HourPlan]) -> str:
    if len(hours) >= HOURS_PER_DAY:
        return "all 24 hours of the day observed"
    shown = ", ".join(f"{h.hour:02d}" for h in sorted(hours, key=lambda h: h.hour))
    return (f"{len(hours)} of 24 hours observed ({shown}); the other "
            f"{HOURS_PER_DAY - len(hours)} priced at their average")


def _hour_json(h: HourPlan) -> dict[str, Any]:
    return {
        "hour": h.hour, "requests": h.requests, "rate_rps": round(h.rate_rps, 4),
        "tokens_per_s": round(h.tokens_per_s, 1), "needed": h.needed,
        "recommended": h.recommended,
        "probes": [{"replicas": p.replicas, "met": p.met,
                    "slis": {k: round(v, 6) for k, v in p.slis.items()}} for p in h.probes],
    }


def parse_what_if(spec: str, base: Scenario,
                  profiles: Callable[[str], EngineProfile]) -> Scenario:
    """``name:key=value,key=value`` (keys ``profile``, ``growth``, ``prefix_cache``
    on/off) -> the base scenario with those changed; the name defaults to the spec."""
    name, _, body = spec.partition(":") if ":" in spec else ("", "", spec)
    sc = base
    for part in (p.strip() for p in body.split(",") if p.strip()):
        key, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"what-if {spec!r}: expected key=value, got {part!r}")
        key = key.strip().replace("-", "_")
        value = value.strip()
        if key == "profile":
            sc = replace(sc, profile=profiles(value))
        elif key == "growth":
            try:
                sc = replace(sc, growth=float(value))
            except ValueError:
                raise ValueError(f"what-if {spec!r}: growth must be a positive number") \
                    from None
        elif key == "prefix_cache":
            if value not in ("on", "off"):
                raise ValueError(f"what-if {spec!r}: prefix_cache is on or off")
            sc = replace(sc, prefix_cache=value == "on")
        else:
            raise ValueError(f"what-if {spec!r}: unknown key {key!r} "
                             "(profile, growth, prefix_cache)")
    return replace(sc, name=name.strip() or body.strip())
