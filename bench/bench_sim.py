"""Cluster-simulation benchmark: tokenplane against the usual policies, same run.

Prints one JSON document. Scenarios (8 replicas, Llama-3-8B on A100 profile):

* ``azure``: Azure LLM inference 2023 conversation trace, a time slice swept over
  load factors; goodput of every policy, the ratios to round-robin and
  least-requests, and interactive p99 TTFT at 85% of round-robin's goodput.
* ``mooncake``: Mooncake conversation trace (prefix block hashes), swept; goodput,
  prefix-cache hit rate against the unlimited-cache oracle.
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
from tokenplane.scheduling.slo import SloClass, default_slo_classes
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, RequestRecord, builtin_policies
from tokenplane.sim.metrics import jain_index, lru_prefix_hit_rate
from tokenplane.sim.runner import clean_json, run_simulation, simulate_point
from tokenplane.sim.traces import load_trace, scale_load, slice_trace
from tokenplane.sim.workload import WorkloadRules, assign

TRACES = Path("/work/shared/traces")
AZURE = TRACES / "azure_llm_2023_conv.csv"
MOONCAKE = TRACES / "mooncake_conversation.jsonl"
ENGINE = "llama3-8b-a100"
ALL = ["round-robin", "least-requests", "sglang-cache-aware", "vllm-fcfs", "tokenplane"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def progress(policy: str, load: float, pt: dict[str, Any]) -> None:
    log(
        f"  {policy:20s} load {load:5.2f} rate {pt['rate_rps']:6.2f} "
        f"att {pt['slo_attainment']:.3f} ttft99 {pt['ttft_p99_s']:.3f} "
        f"tpot50 {pt['tpot_p50_s']:.3f} hit {pt['prefix_hit_rate']:.3f} ({pt['sim_wall_s']} s)"
    )


def ratio(a: float, b: float) -> float | None:
    return None if b <= 0 else round(a / b, 3)


def azure(quick: bool, out: Path | None) -> dict[str, Any]:
    duration: float | None = 900.0 if quick else None
    loads = (
        [7.0, 9.0, 11.0, 13.0]
        if quick
        else [6.0, 7.0, 7.5, 8.0, 9.0, 10.0, 10.5, 11.0, 11.5, 12.0]
    )
    classes = default_slo_classes()
    cluster = ClusterConfig(replicas=8, prefill_budget_s=0.6, token_budget_s=0.4)
    log(f"azure: slice {duration} s, loads {loads}")
    res = run_simulation(
        AZURE, replicas=8, profile=ENGINE, policies=ALL, loads=loads, seed=0,
        out_dir=out / "azure" if out else None, classes=classes, cluster=cluster,
        duration_s=duration, progress=progress,
    )
    good = {k: v["goodput_rps"] for k, v in res["policies"].items()}
    base = res["base_rate_rps"]
    rr_load = good["round-robin"] / base if good["round-robin"] > 0 else loads[0]
    probe = round(0.85 * rr_load, 3)
    trace = slice_trace(load_trace(AZURE), 0.0, duration)
    p99: dict[str, float] = {}
    for pol in ("round-robin", "tokenplane"):
        pt = simulate_point(
            trace, builtin_policies()[pol], probe, engine_profile=ENGINE, classes=classes,
            rules=WorkloadRules(seed=0), cluster=cluster,
        )
        p99[pol] = pt["per_class"]["interactive"]["ttft_p99_s"]
    return {
        "slice_s": duration,
        "base_rate_rps": base,
        "loads": loads,
        "goodput_rps": good,
        "goodput_vs_round_robin": ratio(good["tokenplane"], good["round-robin"]),
        "goodput_vs_least_requests": ratio(good["tokenplane"], good["least-requests"]),
        "probe_load": probe,
        "interactive_ttft_p99_at_85pct_rr_goodput_s": p99,
        "ttft_p99_ratio_tokenplane_over_rr": ratio(p99["tokenplane"], p99["round-robin"]),
        "targets": {"goodput_vs_rr": 1.5, "goodput_vs_lr": 1.2, "ttft_p99_ratio_max": 1 / 3},
    }


def mooncake(quick: bool, out: Path | None) -> dict[str, Any]:
    duration: float | None = 600.0 if quick else None
    loads = [0.75, 1.25, 1.75] if quick else [0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    classes = {
        "interactive": SloClass("interactive", priority=0, ttft_s=5.0, tpot_s=0.1),
        "batch": SloClass("batch", priority=1, deadline_s=600.0, sheddable=True,
                          gate_fraction=0.6),
    }
    cluster = ClusterConfig(replicas=8, prefill_budget_s=3.0, token_budget_s=4.0)
    pols = ["round-robin", "least-requests", "sglang-cache-aware", "tokenplane"]
    log(f"mooncake: slice {duration} s, loads {loads}")
    res = run_simulation(
        MOONCAKE, replicas=8, profile=ENGINE, policies=pols, loads=loads, seed=0,
        out_dir=out / "mooncake" if out else None, classes=classes, cluster=cluster,
        duration_s=duration, progress=progress,
    )
    good = {k: v["goodput_rps"] for k, v in res["policies"].items()}
    hits = {
        k: [round(p["prefix_hit_rate"], 4) for p in v["points"]]
        for k, v in res["policies"].items()
    }
    oracle = res["policies"]["tokenplane"]["points"][0]["oracle_prefix_hit_rate"]
    tp_hit = max(hits["tokenplane"])
    prof = get_profile(ENGINE)
    trace = slice_trace(load_trace(MOONCAKE, prof.block_size), 0.0, duration)
    capped = lru_prefix_hit_rate(
        ((r.prompt_tokens, r.block_hashes) for r in trace),
        prof.block_size,
        8 * prof.kv_capacity_blocks,
    )
    return {
        "slice_s": duration,
        "slo": {"interactive_ttft_s": 5.0, "interactive_tpot_s": 0.1},
        "loads": loads,
        "goodput_rps": good,
        "goodput_vs_round_robin": ratio(good["tokenplane"], good["round-robin"]),
        "goodput_vs_sglang": ratio(good["tokenplane"], good["sglang-cache-aware"]),
        "prefix_hit_rate_per_load": hits,
        "oracle_unlimited_cache_hit_rate": oracle,
        "tokenplane_hit_over_oracle": ratio(tp_hit, oracle or 0.0),
        "oracle_cluster_capacity_lru_hit_rate": round(capped, 4),
        "tokenplane_hit_over_capacity_oracle": ratio(tp_hit, capped),
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
    for pol in ("round-robin", "least-requests", "tokenplane"):
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
    for pol in ("round-robin", "least-requests", "tokenplane"):
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
        for pol in ("round-robin", "tokenplane"):
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", default="azure,mooncake,mixed,fairness")
    args = ap.parse_args()
    only = set(args.only.split(","))
    t0 = time.perf_counter()
    result: dict[str, Any] = {"engine_profile": ENGINE, "replicas": 8, "quick": args.quick}
    if "azure" in only:
        result["azure"] = azure(args.quick, args.out)
    if "mooncake" in only:
        result["mooncake"] = mooncake(args.quick, args.out)
    if "mixed" in only:
        result["mixed"] = mixed(args.quick)
    if "fairness" in only:
        result["fairness"] = fairness(args.quick)
    if args.speed:
        result["speed"] = speed()
    result["bench_wall_s"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(clean_json(result), indent=2)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_sim.json").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
