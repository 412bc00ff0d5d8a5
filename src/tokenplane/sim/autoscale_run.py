"""``tokenplane simulate --autoscale``: a simulated day per autoscaling policy.

Builds the day's workload (:mod:`tokenplane.sim.diurnal`), runs every policy on an
:class:`~tokenplane.sim.dynamic.AutoscaledCluster` with cold starts, and reports per
policy: replica-hours serving and warm, cost, interactive SLO attainment, minutes
below the target, scale events and direction reversals, cold starts and the
requests that waited on one (and how many of those a forecast could have foreseen),
the forecast's error; plus per-minute series for the plots.

Speed options (the figures say which were used):

* ``rate_scale`` k (time dilation): the engine's step-time constants and the SLO
  latency targets are multiplied by k and the request rate divided by k. A replica
  at a given utilisation queues exactly as before on a clock k times slower, so
  attainment and the replicas needed are unchanged, with k times fewer requests
  and engine steps to simulate. What changes: each request lives k times longer
  against the cold start, the policies' windows and the drains.
* ``day_hours`` H < 24: the curve is compressed into H hours (ramps and bursts 24/H
  times steeper and shorter) while cold starts and every policy constant stay in
  real seconds -- a harder, shorter day, for quick runs and tests.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenplane.autoscale.baselines import (
    AibrixKpaPolicy,
    HpaKvPolicy,
    KedaQueuePolicy,
    StaticPolicy,
)
from tokenplane.autoscale.capacity import CapacityEstimator, TokenCosts, profile_costs
from tokenplane.autoscale.forecast import DemandForecaster
from tokenplane.autoscale.model import AutoscalePolicy, ScaleDecision
from tokenplane.autoscale.policy import TokenplanePolicy
from tokenplane.autoscale.spec import PoolPolicySpec
from tokenplane.engine.profiles import EngineProfile, get_profile
from tokenplane.scheduling.slo import SloClass, default_slo_classes
from tokenplane.sim.cluster import ClusterConfig, PolicySpec, RequestRecord
from tokenplane.sim.diurnal import DAY_S, RateCurve, history_points, resample_trace
from tokenplane.sim.dynamic import AutoscaledCluster, run_autoscaled
from tokenplane.sim.runner import clean_json
from tokenplane.sim.traces import TraceRequest, load_trace
from tokenplane.sim.workload import WorkloadRules, assign

AUTOSCALE_POLICIES = ("tokenplane", "static-peak", "static-mean", "hpa-kv", "keda-queue",
                      "aibrix-kpa")
SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class DayConfig:
    """The simulated day. ``peak_rps`` None: the "8-replica class" peak, the rate at
    which ``spec.max_replicas`` replicas run at ``class_utilisation`` of their token
    capacity by the profile's token-cost model (the static baselines are sized at
    it too; the policies' own targets are theirs). ``routing``: the gateway's routing profile (a
    name of the routing profile table), ``gateway_queue`` whether the gateway queues
    (off by default: with it the simulator runs ~3x slower). ``jobs``: policies
    simulated in parallel processes. ``slo_target``: the interactive attainment a minute must
    reach."""

    profile: str = "llama3-8b-a100"
    spec: PoolPolicySpec = field(default_factory=PoolPolicySpec)
    peak_rps: float | None = None
    rate_scale: float = 1.0
    day_hours: float = 24.0
    seed: int = 0
    routing: str = "tokenplane"
    gateway_queue: bool = False
    jobs: int = 1
    slo_target: float = 0.99
    history_days: int = 7
    kpa_target_util: float = 0.7
    class_utilisation: float = 0.7


def dilate_profile(p: EngineProfile, k: float) -> EngineProfile:
    """Every step-time constant x k (the cold start stays)."""
    if k == 1.0:
        return p
    return replace(p, name=f"{p.name}@x{k:g}", t_floor_s=p.t_floor_s * k,
                   a_s_per_token=p.a_s_per_token * k, b_s_per_ctx_token=p.b_s_per_ctx_token * k,
                   c_s_per_prefill_sq=p.c_s_per_prefill_sq * k)


def dilate_classes(classes: Mapping[str, SloClass], k: float) -> dict[str, SloClass]:
    def m(v: float | None) -> float | None:
        return None if v is None else v * k

    return {n: replace(c, ttft_s=m(c.ttft_s), tpot_s=m(c.tpot_s), deadline_s=m(c.deadline_s))
            for n, c in classes.items()}


@dataclass(frozen=True, slots=True)
class DayPlan:
    """What every policy of one day shares."""

    cfg: DayConfig
    profile: EngineProfile  # dilated
    costs: TokenCosts  # of the dilated profile: work units are the same as undilated
    curve: RateCurve  # undilated requests per second, over a 24 h day
    work_per_request: float  # engine-seconds (dilated) per request
    mean_prompt: float
    mean_output: float
    time_scale: float  # day seconds per simulated second (24 / day_hours)

    @property
    def k(self) -> float:
        return self.cfg.rate_scale

    def sim_rate(self, t_sim: float) -> float:
        """Requests per simulated second at simulated time ``t_sim``."""
        return self.curve.rate(t_sim * self.time_scale) / self.k

    def need(self, rps: float) -> float:
        """Replicas (fractional) for ``rps`` undilated requests per second."""
        return rps / self.k * self.work_per_request / self.cfg.class_utilisation

    @property
    def duration_s(self) -> float:
        return self.cfg.day_hours * 3600.0

    def in_burst(self, t_sim: float) -> bool:
        return self.curve.in_burst(t_sim * self.time_scale)


def plan_day(trace: Sequence[TraceRequest], cfg: DayConfig) -> DayPlan:
    base = get_profile(cfg.profile)
    prof = dilate_profile(base, cfg.rate_scale)
    mean_p = sum(r.prompt_tokens for r in trace) / len(trace)
    mean_o = sum(r.output_tokens for r in trace) / len(trace)
    costs = profile_costs(prof, mean_p, mean_o)
    work = costs.work(mean_p, mean_o)
    peak = cfg.peak_rps
    if peak is None:
        # the rate the max pool serves at the target utilisation (undilated)
        peak = cfg.spec.max_replicas * cfg.class_utilisation / (work / cfg.rate_scale)
    return DayPlan(cfg=cfg, profile=prof, costs=costs, curve=RateCurve(peak_rps=peak),
                   work_per_request=work, mean_prompt=mean_p, mean_output=mean_o,
                   time_scale=24.0 / cfg.day_hours)


def build_workload(trace: Sequence[TraceRequest], plan: DayPlan) -> list[TraceRequest]:
    """The day's requests (simulated time)."""
    return resample_trace(trace, plan.sim_rate, duration_s=plan.duration_s, seed=plan.cfg.seed)


def build_autoscaler(name: str, plan: DayPlan) -> tuple[AutoscalePolicy, int]:
    """The named policy for this day and its initial serving replicas."""
    spec = plan.cfg.spec
    peak_need = max(1, math.ceil(plan.need(plan.curve.peak_rps) - 1e-9))
    mean_need = max(1, math.ceil(plan.need(plan.curve.mean_rps()) - 1e-9))
    start = max(spec.min_replicas, math.ceil(plan.need(plan.curve.rate(0.0)) - 1e-9))
    if name == "static-peak":
        n = min(spec.max_replicas, peak_need)
        return StaticPolicy(name, n), n
    if name == "static-mean":
        return StaticPolicy(name, mean_need), mean_need
    if name == "hpa-kv":
        return HpaKvPolicy(spec.min_replicas, spec.max_replicas), start
    if name == "keda-queue":
        return KedaQueuePolicy(spec.min_replicas, spec.max_replicas), start
    if name == "aibrix-kpa":
        # requests in flight per pod at the target utilisation (Little's law: the
        # per-replica request rate there x a request's time in the system, measured
        # as its unloaded service time: prefill plus decode steps)
        rate_per_pod = plan.cfg.kpa_target_util / plan.work_per_request
        p = plan.profile
        step = max(p.t_floor_s, p.a_s_per_token * 64) + p.b_s_per_ctx_token * 64 * (
            plan.mean_prompt + plan.mean_output / 2)
        in_system = plan.mean_prompt * plan.costs.prompt_s + plan.mean_output * step
        return AibrixKpaPolicy(spec.min_replicas, spec.max_replicas,
                               target_per_pod=max(1.0, rate_per_pod * in_system)), start
    if name == "tokenplane":
        fc = DemandForecaster()
        fc.learn(history_points(plan.curve, plan.work_per_request / plan.k,
                                days=plan.cfg.history_days, seed=plan.cfg.seed + 1)
                 if plan.time_scale == 1.0 else _compressed_history(plan))
        # the drain horizons are request lifetimes: they dilate with the rate scale
        policy = TokenplanePolicy(spec, CapacityEstimator(plan.costs), fc,
                                  queue_drain_s=30.0 * plan.k, output_drain_s=10.0 * plan.k)
        return policy, start
    raise ValueError(f"unknown autoscaling policy {name!r}; known: "
                     + ", ".join(AUTOSCALE_POLICIES))


def _compressed_history(plan: DayPlan) -> list[tuple[float, float]]:
    """History on the compressed clock: each earlier day squeezed like this one."""
    pts = history_points(plan.curve, plan.work_per_request / plan.k,
                         days=plan.cfg.history_days, seed=plan.cfg.seed + 1)
    out: list[tuple[float, float]] = []
    for t, v in pts:
        day = math.floor(t / DAY_S)
        out.append((day * DAY_S + (t - day * DAY_S) / plan.time_scale, v))
    return out


def simulate_policy(name: str, plan: DayPlan, workload_trace: Sequence[TraceRequest],
                    classes: Mapping[str, SloClass]) -> dict[str, Any]:
    """One policy over the day: its results dict."""
    cfg = plan.cfg
    spec = cfg.spec
    k = plan.k
    policy, initial = build_autoscaler(name, plan)
    routing = PolicySpec(cfg.routing, cfg.routing, cfg.gateway_queue)
    base = ClusterConfig()
    cluster = ClusterConfig(
        replicas=spec.max_replicas, seed=cfg.seed, fast_decode=True, idle_ticks=False,
        scrape_interval_s=base.scrape_interval_s * k,
        prefill_budget_s=base.prefill_budget_s * k, token_budget_s=base.token_budget_s * k,
        expire_interval_s=base.expire_interval_s * k,
        aging_tokens_per_s=base.aging_tokens_per_s / k,
    )
    interval = getattr(policy, "interval_s", spec.interval_s)
    sim = AutoscaledCluster(
        routing, plan.profile, classes, cluster, policy,
        initial=min(initial, spec.max_replicas), interval_s=float(interval),
        promote_s=spec.promote_s, end_s=plan.duration_s, slo_target=cfg.slo_target,
    )
    wl = assign(workload_trace, WorkloadRules(seed=cfg.seed))
    t0 = time.perf_counter()
    run_autoscaled(sim, wl, plan.duration_s)
    wall = time.perf_counter() - t0
    return summarize_day(name, sim, plan, wall)


def _reversals(decisions: Sequence[ScaleDecision]) -> list[float]:
    """Times at which the serving count changed direction."""
    out: list[float] = []
    last = 0
    for d in decisions:
        if d.direction != 0:
            if last != 0 and d.direction != last:
                out.append(d.at)
            last = d.direction
    return out


def summarize_day(name: str, sim: AutoscaledCluster, plan: DayPlan,
                  wall: float) -> dict[str, Any]:
    cfg = plan.cfg
    spec = cfg.spec
    log = sim.log
    ts = plan.time_scale  # day seconds per simulated second
    serving_h = (log.replica_s["serving"] + log.replica_s["starting"]
                 + log.replica_s["draining"]) / 3600.0 * ts
    warm_h = log.replica_s["warm"] / 3600.0 * ts
    recs = list(sim.records.values())
    inter = [r for r in recs if r.req.slo_class == "interactive"]
    met = [r.met_slo() for r in inter]
    n_min = math.ceil(plan.duration_s / 60.0)
    per_min_n = [0] * n_min
    per_min_ok = [0] * n_min
    arrivals = [0] * n_min
    for r in recs:
        m = min(n_min - 1, int(r.req.arrival // 60))
        arrivals[m] += 1
    for r, ok in zip(inter, met, strict=True):
        m = min(n_min - 1, int(r.req.arrival // 60))
        per_min_n[m] += 1
        per_min_ok[m] += ok
    below = sum(1 for n, ok in zip(per_min_n, per_min_ok, strict=True)
                if n and ok / n < cfg.slo_target)
    # the same, minutes with one miss left out: with time dilated a minute holds few
    # requests (a single miss in 40 is 97.5%), a floor every policy shares
    below_2 = sum(1 for n, ok in zip(per_min_n, per_min_ok, strict=True)
                  if n and ok / n < cfg.slo_target and n - ok >= 2)
    # cold starts a request waited on: an interactive request that arrived while a
    # cold start (ordered -> ready) was under way and waited past its first-token
    # target (or was shed) -- it waited for capacity still loading. A prompt whose
    # own prefill on an idle replica is longer than the target (a 14,050-token one
    # on the A100 profile: 1.11 s against 1 s) waited on nothing: it misses on any
    # pool and is counted apart (``requests_over_first_token_target_alone``). Other
    # misses in those windows are counted apart: most of them, outside bursts, are
    # time-per-output-token misses of requests served at once (a long prefill
    # sharing their steps), which static-peak has too.
    colds = log.cold_starts
    foreseeable_cold = [not _burst_reaction(plan, a) for a, _ in colds]
    waited = waited_foreseeable = missed_during = missed_during_foreseeable = 0
    over_alone = 0
    starts = sorted(zip(colds, foreseeable_cold, strict=True))
    for r, ok in zip(inter, met, strict=True):
        if ok:
            continue
        if r.slo.ttft_s is not None and plan.profile.prefill_alone_s(
                r.req.prompt_tokens - r.cached_tokens) > r.slo.ttft_s:
            over_alone += 1
            continue
        t = r.req.arrival
        hit = [f for (a, b), f in starts if a <= t < b]
        if not hit:
            continue
        foreseeable = any(hit)
        missed_during += 1
        missed_during_foreseeable += foreseeable
        if _waited_first_token(r):
            waited += 1
            waited_foreseeable += foreseeable
    decisions = log.decisions
    changes = [d for d in decisions if d.direction != 0]
    revs = _reversals(decisions)
    hours = max(1, math.ceil(plan.duration_s * ts / 3600.0))
    rev_per_hour = [0] * hours
    for t in revs:
        rev_per_hour[min(hours - 1, int(t * ts // 3600))] += 1
    minutes = [log.minutes.get(m) for m in range(n_min)]
    last = (0, 0, 0)
    series_serving: list[int] = []
    series_warm: list[int] = []
    for v in minutes:
        last = v if v is not None else last
        series_serving.append(last[0])
        series_warm.append(last[2])
    out: dict[str, Any] = {
        "policy": name,
        "replica_hours_serving": round(serving_h, 3),
        "replica_hours_warm": round(warm_h, 3),
        "replica_hours_total": round(serving_h + warm_h, 3),
        "cost": round(serving_h * spec.price_per_replica_hour + warm_h * spec.warm_price, 2),
        "interactive_attainment": sum(met) / len(met) if met else math.nan,
        "all_attainment": (sum(r.met_slo() for r in recs) / len(recs)) if recs else math.nan,
        "requests": len(recs),
        "interactive_requests": len(inter),
        "minutes_below_target": below,
        "minutes_below_target_2plus_misses": below_2,
        "scale_events": len(changes),
        "scale_ups": sum(1 for d in changes if d.direction > 0),
        "scale_downs": sum(1 for d in changes if d.direction < 0),
        "reversals": len(revs),
        "reversals_per_hour_max": max(rev_per_hour) if rev_per_hour else 0,
        "reversals_per_hour_mean": round(len(revs) / hours, 3),
        "cold_starts": len(colds),
        "warm_promotions": log.promotions,
        "requests_waited_on_cold_start": waited,
        "requests_waited_on_foreseeable_cold_start": waited_foreseeable,
        "requests_missed_during_cold_start": missed_during,
        "requests_missed_during_foreseeable_cold_start": missed_during_foreseeable,
        "requests_over_first_token_target_alone": over_alone,
        "sim_wall_s": round(wall, 2),
        "series": {
            "serving": series_serving,
            "warm": series_warm,
            "interactive_n": per_min_n,
            "interactive_ok": per_min_ok,
            "arrivals": arrivals,
        },
        "reasons": _reason_counts(decisions),
    }
    if name == "tokenplane":
        out["forecast"] = forecast_error(decisions, plan)
    return out


def _waited_first_token(r: RequestRecord) -> bool:
    """Whether ``r`` waited past its first-token target (or was never served)."""
    if not r.done or r.shed or r.first_token < 0:
        return True
    return r.slo.ttft_s is not None and r.ttft > r.slo.ttft_s


def _burst_reaction(plan: DayPlan, t_sim: float) -> bool:
    """Whether a cold start ordered at ``t_sim`` reacts to a burst: ordered inside a
    burst or within a cold start plus 10 minutes after one (a forecast learned from
    history cannot see these bursts; anything else it could have)."""
    s = t_sim * plan.time_scale
    lag = (plan.cfg.spec.cold_start_s + 600.0) * plan.time_scale
    return any(b <= s % DAY_S < b + plan.curve.burst_s + lag for b in plan.curve.bursts)


def _reason_counts(decisions: Sequence[ScaleDecision]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in decisions:
        if d.changed and d.reasons:
            out[d.reasons[0]] = out.get(d.reasons[0], 0) + 1
    return out


def forecast_error(decisions: Sequence[ScaleDecision], plan: DayPlan) -> dict[str, Any]:
    """The one-cold-start-ahead forecast against the demand then seen (per-minute
    means): MAPE and the same for a persistence forecast (demand now), over minutes
    with demand."""
    h = plan.cfg.spec.cold_start_s + plan.cfg.spec.interval_s
    demand: dict[int, list[float]] = {}
    fc: dict[int, list[float]] = {}
    for d in decisions:
        m = int(d.at // 60)
        demand.setdefault(m, []).append(float(d.inputs.get("demand_work", 0.0)))
        f = float(d.inputs.get("forecast_work", -1.0))
        if f >= 0:
            fc.setdefault(int((d.at + h) // 60), []).append(f)
    lag = round(h / 60.0)

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    err_f: list[float] = []
    err_p: list[float] = []
    for m, vals in demand.items():
        actual = mean(vals)
        if actual <= 0:
            continue
        if m in fc:
            err_f.append(abs(mean(fc[m]) - actual) / actual)
        if m - lag in demand:
            err_p.append(abs(mean(demand[m - lag]) - actual) / actual)
    return {
        "model": "seasonal profile (5-min bins, per weekday) x damped Holt level/trend",
        "horizon_s": h,
        "mape": round(sum(err_f) / len(err_f), 4) if err_f else None,
        "persistence_mape": round(sum(err_p) / len(err_p), 4) if err_p else None,
        "minutes": len(err_f),
    }


def run_day(
    trace_path: str | Path,
    policies: Sequence[str] = AUTOSCALE_POLICIES,
    out_dir: str | Path | None = None,
    cfg: DayConfig | None = None,
    *,
    plots: bool = True,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Simulate the day for each policy; write results.json (and plots) to out_dir."""
    for p in policies:
        if p not in AUTOSCALE_POLICIES:
            raise ValueError(f"unknown autoscaling policy {p!r}; known: "
                             + ", ".join(AUTOSCALE_POLICIES))
    cfg = cfg or DayConfig()
    if cfg.rate_scale <= 0 or not 0 < cfg.day_hours <= 24:
        raise ValueError("rate_scale must be > 0 and day_hours in (0, 24]")
    prof = get_profile(cfg.profile)
    trace = load_trace(trace_path, prof.block_size)
    if not trace:
        raise ValueError("the trace holds no requests")
    plan = plan_day(trace, cfg)
    day = build_workload(trace, plan)
    classes = dilate_classes(default_slo_classes(), cfg.rate_scale)
    results: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "trace": str(trace_path),
        "shape": "diurnal",
        "curve": {"knots": [list(x) for x in plan.curve.knots],
                  "bursts_s": list(plan.curve.bursts), "burst_s": plan.curve.burst_s,
                  "burst_factor": plan.curve.burst_factor,
                  "peak_rps": plan.curve.peak_rps, "mean_rps": plan.curve.mean_rps()},
        "config": {**asdict(cfg), "spec": asdict(cfg.spec)},
        "engine_profile": cfg.profile,
        "cold_start_s": plan.profile.cold_start_s,
        "requests": len(day),
        "work_per_request_s": plan.work_per_request / plan.k,
        "policies": {},
    }
    if cfg.jobs > 1 and len(policies) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=cfg.jobs) as pool:
            futs = {name: pool.submit(simulate_policy, name, plan, day, classes)
                    for name in policies}
            for name in policies:
                results["policies"][name] = futs[name].result()
                if progress is not None:
                    progress(name, results["policies"][name])
    else:
        for name in policies:
            res = simulate_policy(name, plan, day, classes)
            results["policies"][name] = res
            if progress is not None:
                progress(name, res)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(clean_json(results), indent=1))
        if plots:
            from tokenplane.sim.autoscale_plots import write_day_plots

            write_day_plots(results, plan.time_scale, out)
    return results
