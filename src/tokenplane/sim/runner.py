"""``run_simulation``: sweep load for several policies over one trace; JSON + plots."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tokenplane.engine.profiles import get_profile
from tokenplane.scheduling.slo import SloClass, default_slo_classes
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, PolicySpec, builtin_policies
from tokenplane.sim.metrics import goodput, passes, summarize
from tokenplane.sim.slo_results import slo_results
from tokenplane.sim.sweep import GoodputEstimate, find_knee
from tokenplane.sim.traces import TraceRequest, load_trace, scale_load, slice_trace, trace_span_s
from tokenplane.sim.workload import WorkloadRules, assign
from tokenplane.slo.protection import BudgetProtection, ProtectSpec
from tokenplane.slo.spec import Slo

DEFAULT_POLICIES = (
    "round-robin",
    "least-requests",
    "sglang-cache-aware",
    "vllm-fcfs",
    "tokenplane",
)
SCHEMA_VERSION = 1


def parse_loads(spec: str) -> list[float]:
    """``"0.5:1.2:0.1"`` (start:stop:step, inclusive) or ``"1,2,4"``."""
    spec = spec.strip()
    if ":" in spec:
        parts = [float(x) for x in spec.split(":")]
        if len(parts) != 3 or parts[2] <= 0 or parts[0] <= 0 or parts[1] < parts[0]:
            raise ValueError("load range must be start:stop:step with 0 < start <= stop, step > 0")
        start, stop, step = parts
        n = round((stop - start) / step) + 1
        return [round(start + k * step, 6) for k in range(n)]
    loads = [float(x) for x in spec.split(",") if x.strip()]
    if not loads or any(x <= 0 for x in loads):
        raise ValueError("loads must be positive numbers")
    return loads


def simulate_point(
    workload_trace: Sequence[TraceRequest],
    policy: PolicySpec,
    load: float,
    *,
    engine_profile: str,
    classes: Mapping[str, SloClass],
    rules: WorkloadRules,
    cluster: ClusterConfig,
    slos: Sequence[Slo] = (),
    alias: str = "sim",
    protect: Sequence[ProtectSpec] = (),
) -> dict[str, Any]:
    """One policy at one load factor: the summary dict of that point (with each SLO's
    SLIs when ``slos`` are given, and budget-protecting admission when ``protect``
    names SLOs to protect)."""
    scaled = scale_load(workload_trace, load)
    wl = assign(scaled, rules)
    prof = get_profile(engine_profile)
    t0 = time.perf_counter()
    protection = BudgetProtection(protect, slos) if protect else None
    sim = ClusterSim(policy, prof, classes, cluster, protection=protection, alias=alias)
    sim.run(wl)
    wall = time.perf_counter() - t0
    out = summarize(
        list(sim.records.values()), span_s=trace_span_s(scaled), block_size=prof.block_size
    )
    out["load"] = load
    out["sim_wall_s"] = round(wall, 3)
    if slos:
        out["slos"] = slo_results(slos, list(sim.records.values()), alias)
    if protection is not None:
        out["protection"] = {"restricted_s": sim.restricted_s}
    if sim.scheduler is not None:
        out["gateway_queue"] = {k: asdict(v) for k, v in sim.scheduler.stats.items()}
    return out


def run_simulation(
    trace_path: str | Path,
    replicas: int = 8,
    profile: str = "llama3-8b-a100",
    policies: Sequence[str] = DEFAULT_POLICIES,
    loads: Sequence[float] = (1.0,),
    seed: int = 0,
    out_dir: str | Path | None = None,
    *,
    classes: Mapping[str, SloClass] | None = None,
    rules: WorkloadRules | None = None,
    cluster: ClusterConfig | None = None,
    start_s: float = 0.0,
    duration_s: float | None = None,
    plots: bool = True,
    progress: Callable[[str, float, dict[str, Any]], None] | None = None,
    slos: Sequence[Slo] = (),
    alias: str = "sim",
    bisect: bool = False,
    rel_tol: float = 0.02,
    protect: Sequence[ProtectSpec] = (),
) -> dict[str, Any]:
    """Replay ``trace_path`` through every policy at every load factor.

    ``loads`` multiply the trace's request rate (arrival times divided by the
    factor). With ``bisect`` the goodput knee of each policy is searched beyond the
    swept loads and bisected to ``rel_tol``; without it each policy's goodput says
    whether the loads tried capped it. ``slos`` (judged as model ``alias``) add each
    SLO's SLIs to every point. Returns the results dict (schema in
    docs/SIMULATION.md) and, when ``out_dir`` is given, writes ``results.json`` and
    PNG plots there.
    """
    known = builtin_policies()
    for p in policies:
        if p not in known:
            raise ValueError(f"unknown policy {p!r}; known: {', '.join(sorted(known))}")
    classes = dict(classes or default_slo_classes())
    rules = rules or WorkloadRules(seed=seed)
    cluster = cluster or ClusterConfig(replicas=replicas, seed=seed)
    prof = get_profile(profile)
    trace = slice_trace(load_trace(trace_path, prof.block_size), start_s, duration_s)
    if not trace:
        raise ValueError("the trace (slice) holds no requests")
    results: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "trace": str(trace_path),
        "slice": {"start_s": start_s, "duration_s": duration_s, "requests": len(trace)},
        "base_rate_rps": len(trace) / trace_span_s(trace),
        "replicas": cluster.replicas,
        "engine_profile": profile,
        "seed": seed,
        "loads": list(loads),
        "slo_classes": {k: asdict(v) for k, v in classes.items()},
        "workload_rules": asdict(rules),
        "cluster": asdict(cluster),
        "slos": [s.name for s in slos],
        "protect": [asdict(p) for p in protect],
        "policies": {},
    }
    for name in policies:

        def point(load: float, name: str = name) -> dict[str, Any]:
            pt = simulate_point(trace, known[name], load, engine_profile=profile,
                                classes=classes, rules=rules, cluster=cluster, slos=slos,
                                alias=alias, protect=protect)
            if progress is not None:
                progress(name, load, pt)
            return pt

        points = [point(load) for load in loads]
        est = find_knee(points, point, rel_tol=rel_tol) if bisect else None
        results["policies"][name] = {
            "goodput_rps": est.goodput_rps if est is not None else goodput(points),
            "goodput": goodput_bound(points, est),
            "points": sorted(points + (est.probes if est is not None else []),
                             key=lambda p: float(p["load"])),
        }
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(clean_json(results), indent=2))
        if plots:
            from tokenplane.sim.plots import write_plots

            write_plots(results, out)
    return results


def goodput_bound(
    points: Sequence[dict[str, Any]], est: GoodputEstimate | None, threshold: float = 0.9
) -> dict[str, Any]:
    """How far to trust a goodput figure: ``bracketed`` (the knee lies between
    ``load_pass`` and ``load_fail``), ``capped`` (every load tried passed: the goodput
    is at least the figure) or ``below`` (no load tried passed: it is under the lowest,
    reported as 0)."""
    if est is not None:
        lo, hi = est.load_pass, est.load_fail
        probes = len(est.probes)
    else:
        passing = [float(p["load"]) for p in points if passes(p, threshold)]
        lo = max(passing) if passing else 0.0
        above = sorted(float(p["load"]) for p in points if float(p["load"]) > lo)
        hi = above[0] if above else None
        probes = 0
    bound = "below" if lo == 0 else "capped" if hi is None else "bracketed"
    return {"bound": bound, "load_pass": lo, "load_fail": hi, "probes": probes,
            "rel_precision": (hi - lo) / lo if hi is not None and lo > 0 else None}


def clean_json(x: Any) -> Any:
    """A copy with NaN and infinities replaced by None (strict JSON)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): clean_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean_json(v) for v in x]
    return x
