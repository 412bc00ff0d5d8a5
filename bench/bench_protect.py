"""Budget-protecting admission on the mixed-class simulation (issue 14's figure).

Azure LLM 2023 conversation trace, 8 Llama-3-8B/A100 replicas, the default profile,
half the requests batch (the default classes). First the load factor L where
interactive SLO attainment (TTFT within the class's 1 s) first drops below 99% is
bracketed and bisected; then, at 1.3 L, the same workload runs without and with
protection of the interactive SLO (objective 0.99, engage above 1x burn over 5
minutes, release at 0.5x; batch held to a tenth of the gate and shed after 5 s of
waiting). Prints one JSON document: the knee, then for both runs the interactive
SLO attainment and what batch got (completed, within its deadline, shed, waits),
and a third run with no batch traffic at all: the ceiling of what any batch
admission policy could give the interactive half at that load.

Usage: python bench/bench_protect.py [--slice 0] [--loads 8:20:1] [--out FILE]
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
from tokenplane.scheduling.slo import default_slo_classes
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, builtin_policies
from tokenplane.sim.runner import parse_loads
from tokenplane.sim.traces import load_trace, scale_load, slice_trace
from tokenplane.sim.workload import WorkloadRules, assign
from tokenplane.slo.protection import BudgetProtection, ProtectSpec
from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules

AZURE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "azure_llm_2023_conv.csv"
ENGINE = "llama3-8b-a100"
SLO = Slo("interactive-ttft", Selector(slo_class="interactive"), (Sli(SliKind.TTFT, 1.0),),
          0.99, 30 * 86400.0, default_rules(30 * 86400.0, 0.99))
SPEC = ProtectSpec("interactive-ttft", ("batch",), burn_rate=1.0, release_burn_rate=0.5,
                   window_s=300.0, gate_fraction=0.1, max_wait_s=5.0)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(load: float, slice_s: float, protect: bool, with_batch: bool = True) -> dict[str, Any]:
    """One run; ``with_batch=False`` drops the batch half altogether (the most any batch
    admission policy could give interactive traffic: its ceiling)."""
    trace = scale_load(slice_trace(load_trace(AZURE), 0.0, slice_s or None), load)
    wl = assign(trace, WorkloadRules(batch_fraction=0.5, seed=0))
    if not with_batch:
        wl = [r for r in wl if r.slo_class != "batch"]
    sim = ClusterSim(builtin_policies()[DEFAULT_PROFILE], get_profile(ENGINE),
                     default_slo_classes(), ClusterConfig(replicas=8),
                     protection=BudgetProtection([SPEC], [SLO]) if protect else None)
    t0 = time.perf_counter()
    sim.run(wl)
    wall = time.perf_counter() - t0
    recs = list(sim.records.values())
    inter = [r for r in recs if r.req.slo_class == "interactive"]
    batch = [r for r in recs if r.req.slo_class == "batch"]
    q = sim.scheduler.stats.get("batch") if sim.scheduler is not None else None
    out = {
        "load": load,
        "requests": len(recs),
        "interactive_attainment": sum(
            1 for r in inter if r.done and not r.shed and r.ttft <= 1.0) / len(inter),
        "batch_completed": sum(1 for r in batch if r.done and not r.shed) / max(1, len(batch)),
        "batch_within_deadline": sum(r.met_slo() for r in batch) / max(1, len(batch)),
        "batch_shed": sum(1 for r in batch if r.shed) / max(1, len(batch)),
        "batch_mean_wait_s": (q.wait_sum_s / max(1, q.released)) if q else None,
        "restricted_s": sim.restricted_s,
        "sim_wall_s": round(wall, 1),
    }
    log(f"  load {load} protect={protect} batch={with_batch}: {out}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slice", type=float, default=0.0,
                    help="trace seconds from the start (0: the whole hour)")
    ap.add_argument("--loads", default="8:20:1", help="sweep to bracket the knee")
    ap.add_argument("--precision", type=float, default=0.02)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sweep = []
    for load in parse_loads(args.loads):
        pt = run(load, args.slice, False)
        sweep.append(pt)
        if pt["interactive_attainment"] < 0.99:
            break
    passing = [p["load"] for p in sweep if p["interactive_attainment"] >= 0.99]
    failing = [p["load"] for p in sweep if p["interactive_attainment"] < 0.99]
    if not passing or not failing:
        raise SystemExit(f"the sweep did not bracket the knee: {sweep}")
    lo, hi = max(passing), min(failing)
    while (hi - lo) / lo > args.precision:
        mid = round((lo + hi) / 2, 4)
        pt = run(mid, args.slice, False)
        sweep.append(pt)
        lo, hi = (mid, hi) if pt["interactive_attainment"] >= 0.99 else (lo, mid)
    knee = hi  # where interactive attainment first drops below 99%
    at = round(1.3 * knee, 4)
    result = {
        "trace": AZURE.name, "slice_s": args.slice, "replicas": 8, "engine": ENGINE,
        "profile": DEFAULT_PROFILE, "batch_fraction": 0.5,
        "knee_load": knee, "last_passing_load": lo, "sweep": sweep,
        "protect": {"slo": SLO.name, "objective": SLO.objective, "burn_rate": SPEC.burn_rate,
                    "release_burn_rate": SPEC.release_burn_rate, "window_s": SPEC.window_s,
                    "gate_fraction": SPEC.gate_fraction, "max_wait_s": SPEC.max_wait_s},
        "at_1_3x": {"load": at, "off": run(at, args.slice, False),
                    "on": run(at, args.slice, True),
                    "interactive_alone": run(at, args.slice, False, with_batch=False)},
    }
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
