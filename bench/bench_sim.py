"""Cluster-simulation benchmark: tokenplane against the usual policies, same run.

Prints one JSON document. Scenarios (8 replicas, Llama-3-8B on A100 profile):

* ``azure``: Azure LLM inference 2023 conversation trace, a time slice swept over
  load factors; goodput of every policy, the ratios to round-robin and
  least-requests (each knee bisected to 1%), and interactive TTFT p50/p90/p99 at
  85% of round-robin's goodput, with the prefill-time lower bound.
* ``azure_h100``: round-robin's and tokenplane's goodput on H100 engines
  (bisected) and the TTFT probe at 85% of round-robin's.
* ``mooncake``: Mooncake conversation trace (prefix block hashes), swept; goodput,
  prefix-cache hit rate against the unlimited-cache oracle.
* ``mooncake_offload``: the same, every policy on ``llama3-8b-a100-offload``
  engines (HBM plus a host-DRAM KV tier), so the comparison stays fair.
* ``mixed``: half the requests batch, offered load above capacity: interactive
  SLO attainment while batch saturates the cluster.
* ``fairness``: five Zipf-weighted tenants, heavy overload so all are backlogged;
  Jain's index over tokens served per tenant while arrivals last.
* ``speed`` (``--speed``): wall time of one full hour of each trace per point.

Usage: python bench/bench_sim.py [--quick] [--speed] [--out DIR] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from tokenplane.engine.profiles import get_profile
from tokenplane.routing.profiles import DEFAULT_PROFILE
from tokenplane.scheduling.slo import SloClass, default_slo_classes
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, RequestRecord, builtin_policies
from tokenplane.sim.metrics import jain_index, lru_prefix_hit_rate, percentile
from tokenplane.sim.runner import clean_json, run_simulation, simulate_point
from tokenplane.sim.sweep import refine_goodput
from tokenplane.sim.traces import TraceRequest, load_trace, scale_load, slice_trace
from tokenplane.sim.workload import WorkloadRules, assign

TRACES = Path("/work/shared/traces")
AZURE = TRACES / "azure_llm_2023_conv.csv"
MOONCAKE = TRACES / "mooncake_conversation.jsonl"
ENGINE = "llama3-8b-a100"
OFFLOAD_ENGINE = "llama3-8b-a100-offload"
OURS = DEFAULT_PROFILE  # what a gateway with no routing config runs
ALL = ["round-robin", "least-requests", "sglang-cache-aware", "vllm-fcfs", OURS]
ONLY_POLICIES: list[str] | None = None  # --policies: run these instead of a scenario's own


def policies_for(default: list[str]) -> list[str]:
    return list(ONLY_POLICIES) if ONLY_POLICIES else default


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def progress(policy: str, load: float, pt: dict[str, Any]) -> None:
    log(
        f"  {policy:20s} load {load:5.2f} rate {pt['rate_rps']:6.2f} "
        f"att {pt['slo_attainment']:.3f} ttft99 {pt['ttft_p99_s']:.3f} "
        f"tpot50 {pt['tpot_p50_s']:.3f} hit {pt['prefix_hit_rate']:.3f} ({pt['sim_wall_s']} s)"
    )


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else round(a / b, 3)


def prefill_time_s(profile: str, prompt: int) -> float:
    """Time an idle replica needs to prefill ``prompt`` tokens (chunked prefill, no
    cache), from the profile's step-time model: a lower bound on that request's TTFT."""
    p = get_profile(profile)
    t = 0.0
    left = prompt
    while left > 0:
        n = min(left, p.max_num_batched_tokens)
        t += max(p.t_floor_s, p.a_s_per_token * n) + p.c_s_per_prefill_sq * n * n
        left -= n
    return t


def refine(res: dict[str, Any], trace: list[TraceRequest], profile: str,
           classes: dict[str, SloClass], cluster: ClusterConfig,
           policies: list[str], rel_tol: float = 0.01) -> dict[str, Any]:
    """Bisect each policy's goodput knee to ``rel_tol`` (see tokenplane.sim.sweep)."""
    out: dict[str, Any] = {}
    for pol in policies:
        def evaluate(load: float, pol: str = pol) -> dict[str, Any]:
            pt = simulate_point(
                trace, builtin_policies()[pol], load, engine_profile=profile, classes=classes,
                rules=WorkloadRules(seed=0), cluster=cluster,
            )
            progress(pol + " (bisect)", load, pt)
            return pt

        est = refine_goodput(res["policies"][pol]["points"], evaluate, rel_tol=rel_tol)
        out[pol] = {
            "goodput_rps": est.goodput_rps,
            "load_pass": round(est.load_pass, 4),
            "load_fail": None if est.load_fail is None else round(est.load_fail, 4),
            "rel_precision": None if est.rel_precision is None else round(est.rel_precision, 4),
            "probes": [
                {"load": round(p["load"], 4), "rate_rps": p["rate_rps"],
                 "slo_attainment": p["slo_attainment"]}
                for p in est.probes
            ],
        }
    return out


def ttft_probe(trace: list[TraceRequest], profile: str, load: float,
               classes: dict[str, SloClass], cluster: ClusterConfig) -> dict[str, Any]:
    """Interactive TTFT p50/p90/p99 of round-robin and tokenplane at one load, and
    the same percentiles of the idle-replica prefill time (a lower bound for any
    policy: every request's TTFT is at least its own prefill time)."""
    out: dict[str, Any] = {"load": load}
    wl = assign(scale_load(trace, load), WorkloadRules(seed=0))
    inter = [r for r in wl if r.slo_class == "interactive"]
    floor = [prefill_time_s(profile, r.prompt_tokens) for r in inter]
    out["prefill_lower_bound_s"] = {f"p{q}": round(percentile(floor, q), 4) for q in (50, 90, 99)}
    out["interactive_prompt_tokens"] = {
        f"p{q}": percentile([float(r.prompt_tokens) for r in inter], q) for q in (50, 90, 99)
    }
    pols = [p for p in policies_for(["round-robin", OURS]) if p != "vllm-fcfs"]
    for pol in pols:
        sim = ClusterSim(builtin_policies()[pol], get_profile(profile), classes, cluster)
        sim.run(wl)
        ttft = [r.ttft for r in sim.records.values() if r.slo.name == "interactive" and r.done]
        out[pol] = {f"p{q}": round(percentile(ttft, q), 4) for q in (50, 90, 99)}
    if "round-robin" in out:
        for pol in pols:
            if pol != "round-robin":
                out[f"ratio_{pol}_over_rr"] = {
                    k: ratio(out[pol][k], out["round-robin"][k]) for k in ("p50", "p90", "p99")
                }
        out["lower_bound_over_rr"] = {
            k: ratio(out["prefill_lower_bound_s"][k], out["round-robin"][k])
            for k in ("p50", "p90", "p99")
        }
    return out


def azure(quick: bool, out: Path | None) -> dict[str, Any]:
    duration: float | None = 900.0 if quick else None
    loads = (
        [7.0, 9.0, 11.0, 13.0]
        if quick
        else [6.0, 7.0, 7.5, 8.0, 9.0, 10.0, 10.5, 11.0, 11.5, 12.0, 12.5, 13.0]
    )  # up to 13x so that every knee is bracketed by the sweep
    classes = default_slo_classes()
    cluster = ClusterConfig(replicas=8, prefill_budget_s=0.6, token_budget_s=0.4)
    pols = policies_for(ALL)
    log(f"azure: slice {duration} s, loads {loads}, policies {pols}")
    res = run_simulation(
        AZURE, replicas=8, profile=ENGINE, policies=pols, loads=loads, seed=0,
        out_dir=out / "azure" if out else None, classes=classes, cluster=cluster,
        duration_s=duration, progress=progress,
    )
    trace = slice_trace(load_trace(AZURE), 0.0, duration)
    coarse = {k: v["goodput_rps"] for k, v in res["policies"].items()}
    fine = refine(res, trace, ENGINE, classes, cluster, pols)
    good = {k: v["goodput_rps"] for k, v in fine.items()}
    base = res["base_rate_rps"]
    rr_load = (fine["round-robin"]["load_pass"] if "round-robin" in fine else 0.0) or loads[0]
    probe = round(0.85 * rr_load, 3)
    ttft = ttft_probe(trace, ENGINE, probe, classes, cluster)
    return {
        "slice_s": duration,
        "base_rate_rps": base,
        "loads": loads,
        "goodput_rps_coarse": coarse,
        "goodput_rps": good,
        "bisection": fine,
        "policy": OURS,
        "goodput_vs_round_robin": ratio(good.get(OURS), good.get("round-robin")),
        "goodput_vs_least_requests": ratio(good.get(OURS), good.get("least-requests")),
        "probe_load": probe,
        "interactive_ttft_at_85pct_rr_goodput": ttft,
        "ttft_p99_ratio_over_rr": ttft.get(f"ratio_{OURS}_over_rr", {}).get("p99"),
        "targets": {"goodput_vs_rr": 1.5, "goodput_vs_lr": 1.2, "ttft_p99_ratio_max": 1 / 3},
    }


def azure_h100(quick: bool) -> dict[str, Any]:
    """Round-robin's and tokenplane's goodput on H100 engines (same gate budgets in
    seconds of work), bisected, and the TTFT probe at 85% of round-robin's."""
    profile = "llama3-8b-h100"
    duration: float | None = 900.0 if quick else None
    loads = [10.0, 15.0, 20.0, 25.0, 30.0, 36.0, 42.0, 48.0] if not quick else [15.0, 25.0, 40.0]
    classes = default_slo_classes()
    cluster = ClusterConfig(replicas=8, prefill_budget_s=0.6, token_budget_s=0.4)
    pols = policies_for(["round-robin", OURS])
    log(f"azure_h100: slice {duration} s, loads {loads}")
    res = run_simulation(
        AZURE, replicas=8, profile=profile, policies=pols, loads=loads, seed=0,
        classes=classes, cluster=cluster, duration_s=duration, progress=progress, plots=False,
    )
    trace = slice_trace(load_trace(AZURE), 0.0, duration)
    fine = refine(res, trace, profile, classes, cluster, pols, rel_tol=0.02)
    good = {k: v["goodput_rps"] for k, v in fine.items()}
    rr_load = (fine["round-robin"]["load_pass"] if "round-robin" in fine else 0.0) or loads[0]
    probe = round(0.85 * rr_load, 3)
    return {
        "engine_profile": profile,
        "policy": OURS,
        "slice_s": duration,
        "loads": loads,
        "goodput_rps": good,
        "goodput_vs_round_robin": ratio(good.get(OURS), good.get("round-robin")),
        "bisection": fine,
        "probe_load": probe,
        "interactive_ttft_at_85pct_rr_goodput": ttft_probe(trace, profile, probe, classes,
                                                           cluster),
    }


def mooncake(quick: bool, out: Path | None, profile: str = ENGINE,
             tag: str = "mooncake") -> dict[str, Any]:
    duration: float | None = 600.0 if quick else None
    loads = [0.75, 1.25, 1.75] if quick else [0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    if get_profile(profile).host_kv_blocks and not quick:
        loads += [2.25, 2.5]  # the tiered engines carry more: bracket every knee
    classes = {
        "interactive": SloClass("interactive", priority=0, ttft_s=5.0, tpot_s=0.1),
        "batch": SloClass("batch", priority=1, deadline_s=600.0, sheddable=True,
                          gate_fraction=0.6),
    }
    cluster = ClusterConfig(replicas=8, prefill_budget_s=3.0, token_budget_s=4.0)
    pols = policies_for(["round-robin", "least-requests", "sglang-cache-aware", OURS])
    log(f"{tag}: profile {profile}, slice {duration} s, loads {loads}")
    res = run_simulation(
        MOONCAKE, replicas=8, profile=profile, policies=pols, loads=loads, seed=0,
        out_dir=out / tag if out else None, classes=classes, cluster=cluster,
        duration_s=duration, progress=progress,
    )
    coarse = {k: v["goodput_rps"] for k, v in res["policies"].items()}
    trace = slice_trace(load_trace(MOONCAKE, get_profile(profile).block_size), 0.0, duration)
    fine = refine(res, trace, profile, classes, cluster, pols, rel_tol=0.02)
    good = {k: v["goodput_rps"] for k, v in fine.items()}
    hits = {
        k: [round(p["prefix_hit_rate"], 4) for p in v["points"]]
        for k, v in res["policies"].items()
    }
    host_hits = {
        k: [round(p["host_prefix_hit_rate"], 4) for p in v["points"]]
        for k, v in res["policies"].items()
    }
    oracle = res["policies"][pols[0]]["points"][0]["oracle_prefix_hit_rate"]
    tp_hit = max(hits[OURS]) if OURS in hits else None
    prof = get_profile(profile)
    capped = lru_prefix_hit_rate(
        ((r.prompt_tokens, r.block_hashes) for r in trace),
        prof.block_size,
        8 * (prof.kv_capacity_blocks + prof.host_kv_blocks),
    )
    return {
        "engine_profile": profile,
        "hbm_blocks_per_replica": prof.kv_capacity_blocks,
        "host_blocks_per_replica": prof.host_kv_blocks,
        "slice_s": duration,
        "slo": {"interactive_ttft_s": 5.0, "interactive_tpot_s": 0.1},
        "loads": loads,
        "goodput_rps_coarse": coarse,
        "goodput_rps": good,
        "bisection": fine,
        "policy": OURS,
        "goodput_vs_round_robin": ratio(good.get(OURS), good.get("round-robin")),
        "goodput_vs_sglang": ratio(good.get(OURS), good.get("sglang-cache-aware")),
        "prefix_hit_rate_per_load": hits,
        "host_prefix_hit_rate_per_load": host_hits,
        "oracle_unlimited_cache_hit_rate": oracle,
        "hit_over_oracle": ratio(tp_hit, oracle or 0.0),
        "oracle_cluster_capacity_lru_hit_rate": round(capped, 4),
        "hit_over_capacity_oracle": ratio(tp_hit, capped),
        "targets": {"hit_over_oracle": 0.9, "goodput_vs_rr": 1.5, "goodput_vs_sglang": ">1"},
    }


def _run_sim(policy: str, load: float, rules: WorkloadRules, duration: float | None,
             classes: dict[str, SloClass]) -> ClusterSim:
    trace = scale_load(slice_trace(load_trace(AZURE), 0.0, duration), load)
    sim = ClusterSim(
        builtin_policies()[policy], get_profile(ENGINE), classes, ClusterConfig(replicas=8)
    )
    sim.run(assign(trace, rules))
    return sim


def mixed(quick: bool) -> dict[str, Any]:
    duration: float | None = 900.0 if quick else None
    load = 12.0
    rules = WorkloadRules(batch_fraction=0.5, seed=0)
    classes = default_slo_classes()
    log(f"mixed: 50% batch, load {load}, slice {duration} s")
    out: dict[str, Any] = {"batch_fraction": 0.5, "load": load, "slice_s": duration}
    for pol in policies_for(["round-robin", "least-requests", OURS]):
        sim = _run_sim(pol, load, rules, duration, classes)
        recs = list(sim.records.values())
        inter = [r for r in recs if r.slo.name == "interactive"]
        batch = [r for r in recs if r.slo.name == "batch"]
        q = sim.scheduler.stats if sim.scheduler is not None else {}
        out[pol] = {
            "interactive_attainment": sum(r.met_slo() for r in inter) / len(inter),
            "batch_attainment": sum(r.met_slo() for r in batch) / len(batch),
            "batch_shed": sum(r.shed for r in batch),
            "batch_max_gateway_wait_s": q["batch"].wait_max_s if "batch" in q else None,
            "batch_mean_gateway_wait_s": (
                q["batch"].wait_sum_s / max(1, q["batch"].released) if "batch" in q else None
            ),
        }
        log(f"  {pol}: {out[pol]}")
    out["target_interactive_attainment"] = 0.99
    return out


def served_by(r: RequestRecord, cut: float) -> float:
    """Tokens of one request served by time ``cut``: its prompt once the first token
    is out, and its output tokens pro rata over the decode time before ``cut``."""
    if r.first_token < 0 or r.first_token > cut:
        return 0.0
    if r.finish <= cut:
        return float(r.req.prompt_tokens + r.output_tokens)
    span = max(1e-9, r.finish - r.first_token)
    return r.req.prompt_tokens + r.req.output_tokens * (cut - r.first_token) / span


def fairness(quick: bool) -> dict[str, Any]:
    duration = 600.0 if quick else 1200.0
    load = 40.0
    rules = WorkloadRules(batch_fraction=0.0, tenants=5, zipf_s=1.0, seed=0)
    classes = default_slo_classes()
    log(f"fairness: 5 Zipf tenants, load {load} (overload), {duration:.0f} s slice")
    out: dict[str, Any] = {"load": load, "slice_s": duration, "tenants": 5, "zipf_s": 1.0}
    for pol in policies_for(["round-robin", "least-requests", OURS]):
        sim = _run_sim(pol, load, rules, duration, classes)
        recs = list(sim.records.values())
        cut = max(r.req.arrival for r in recs)  # while arrivals last, all are backlogged
        served = {t: 0.0 for t in sorted({r.req.tenant for r in recs})}
        for r in recs:
            served[r.req.tenant] += served_by(r, cut)
        out[pol] = {
            "jain_index": round(jain_index(served.values()), 4),
            "tokens_served_by_cut": {k: round(v) for k, v in served.items()},
            "cut_s": round(cut, 2),
        }
        log(f"  {pol}: {out[pol]}")
    out["target_jain"] = 0.95
    return out


def speed() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, path, load, classes, cluster in (
        ("azure_conv_full_hour", AZURE, 12.0, default_slo_classes(), ClusterConfig()),
        ("mooncake_full_hour", MOONCAKE, 1.25, None, ClusterConfig(prefill_budget_s=3.0,
                                                                   token_budget_s=4.0)),
    ):
        trace = load_trace(path)
        for pol in policies_for(["round-robin", OURS]):
            t0 = time.perf_counter()
            pt = simulate_point(
                trace, builtin_policies()[pol], load, engine_profile=ENGINE,
                classes=classes or default_slo_classes(), rules=WorkloadRules(seed=0),
                cluster=cluster,
            )
            out[f"{name}/{pol}"] = {
                "requests": pt["requests"],
                "load": load,
                "wall_s": round(time.perf_counter() - t0, 2),
            }
            log(f"  speed {name}/{pol}: {out[f'{name}/{pol}']}")
    return out


def plot_hit_rates(results: dict[str, Any], path: Path) -> None:
    """Prefix-cache hit rate against load, HBM-only and tiered engines, per policy,
    with the unlimited-cache oracle."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = {"round-robin": "C0", "least-requests": "C1", "sglang-cache-aware": "C2",
               OURS: "C3"}
    oracle = None
    for key, style in (("mooncake", "--"), ("mooncake_offload", "-")):
        sc = results.get(key)
        if not sc:
            continue
        oracle = sc["oracle_unlimited_cache_hit_rate"]
        for pol, hits in sc["prefix_hit_rate_per_load"].items():
            ax.plot(sc["loads"][: len(hits)], hits, style, marker="o", ms=3,
                    color=colours.get(pol), label=f"{pol} ({sc['engine_profile']})")
    if oracle is not None:
        ax.axhline(oracle, color="k", lw=0.8, label="unlimited-cache oracle")
        ax.axhline(0.9 * oracle, color="k", lw=0.8, ls=":", label="90% of the oracle")
    ax.set_xlabel("load factor (x trace rate)")
    ax.set_ylabel("prefix-cache hit rate")
    ax.set_title("Mooncake conversation: prefix hits, HBM only (--) vs HBM + host DRAM (-)")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", default="azure,azure_h100,mooncake,mooncake_offload,mixed,fairness")
    ap.add_argument("--policies", default="",
                    help="comma-separated policies to run instead of each scenario's own")
    args = ap.parse_args()
    global ONLY_POLICIES
    ONLY_POLICIES = [p for p in args.policies.split(",") if p] or None
    only = set(args.only.split(","))
    t0 = time.perf_counter()
    result: dict[str, Any] = {"engine_profile": ENGINE, "replicas": 8, "quick": args.quick}
    if "azure" in only:
        result["azure"] = azure(args.quick, args.out)
    if "azure_h100" in only:
        result["azure_h100"] = azure_h100(args.quick)
    if "mooncake" in only:
        result["mooncake"] = mooncake(args.quick, args.out)
    if "mooncake_offload" in only:
        result["mooncake_offload"] = mooncake(
            args.quick, args.out, profile=OFFLOAD_ENGINE, tag="mooncake_offload"
        )
    if "mixed" in only:
        result["mixed"] = mixed(args.quick)
    if "fairness" in only:
        result["fairness"] = fairness(args.quick)
    if args.speed:
        result["speed"] = speed()
    if args.out and ("mooncake" in result or "mooncake_offload" in result):
        plot_hit_rates(result, args.out / "mooncake_hit_rate_vs_load.png")
    result["bench_wall_s"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(clean_json(result), indent=2)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_sim.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
