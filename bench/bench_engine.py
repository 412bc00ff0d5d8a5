"""Benchmark of the simulated engine (tokenplane.engine); prints JSON.

1. Virtual time: one hour of the Azure LLM 2023 conversation trace (Patel et al.,
   "Splitwise", ISCA 2024; CC-BY 4.0, processed copy from microsoft/vidur) on 8
   llama3-8b-a100 engines, requests assigned round-robin. Budget: 120 s of wall time.
   Baseline in the same run: a bare Python loop over the same number of steps
   (the floor any per-step Python code pays).
2. Real time: concurrent non-streaming chat requests through EngineService.handle on
   the ``instant`` profile. Baseline in the same run: the same number of
   orjson-encoded bodies alone.

Run: python bench/bench_engine.py [--requests N] [--trace PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import sys
import time
from pathlib import Path

import orjson

from tokenplane.engine.core import Engine, EngineRequest
from tokenplane.engine.defaults import default_tokenizer, simple_prompt_ids
from tokenplane.engine.profiles import get_profile
from tokenplane.engine.serving.service import EngineService
from tokenplane.engine.virtual import run_virtual

TRACE = Path("/work/shared/traces/azure_llm_2023_conv.csv")


def virtual_hour(trace: Path, replicas: int = 8) -> dict[str, float]:
    with trace.open() as fh:
        rows = list(csv.DictReader(fh))
    per: list[list[tuple[float, EngineRequest]]] = [[] for _ in range(replicas)]
    for i, row in enumerate(rows):
        req = EngineRequest(str(i), max(1, int(float(row["num_prefill_tokens"]))),
                            max(1, int(float(row["num_decode_tokens"]))))
        per[i % replicas].append((float(row["arrived_at"]), req))
    profile = get_profile("llama3-8b-a100")
    t0 = time.perf_counter()
    steps = 0
    sim_end = 0.0
    ttfts: list[float] = []
    for arrivals in per:
        run = run_virtual(Engine(profile), arrivals)
        steps += run.steps
        sim_end = max(sim_end, run.end_time)
        ttfts.extend(t.ttft for t in run.timings.values())
    wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    acc = 0
    for i in range(steps):
        acc += i & 1
    floor = time.perf_counter() - t1
    ttfts.sort()
    return {
        "requests": len(rows),
        "simulated_s": sim_end,
        "steps": steps,
        "wall_s": round(wall, 3),
        "budget_s": 120.0,
        "us_per_step": round(wall / steps * 1e6, 3),
        "baseline_bare_loop_us_per_step": round(floor / steps * 1e6, 3),
        "ttft_p50_s": round(ttfts[len(ttfts) // 2], 4),
        "ttft_p99_s": round(ttfts[int(len(ttfts) * 0.99)], 4),
    }


async def realtime(n: int) -> dict[str, float]:
    tok = default_tokenizer()
    svc = EngineService(get_profile("instant"), tok, simple_prompt_ids(tok), "sim")
    await svc.start()
    bodies = [orjson.dumps({"model": "sim", "max_tokens": 16,
                            "messages": [{"role": "user", "content": f"question {i}"}]})
              for i in range(n)]
    t0 = time.perf_counter()
    resps = await asyncio.gather(*(svc.handle("POST", "/v1/chat/completions", b, {})
                                   for b in bodies))
    wall = time.perf_counter() - t0
    await svc.close()
    assert all(r.status == 200 for r in resps)
    t1 = time.perf_counter()
    for i in range(n):
        orjson.loads(bodies[i])
        orjson.dumps({"i": i})
    base = time.perf_counter() - t1
    return {"requests": n, "wall_s": round(wall, 3), "req_per_s": round(n / wall, 1),
            "baseline_codec_only_s": round(base, 4)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--trace", type=Path, default=TRACE)
    args = parser.parse_args()
    out: dict[str, object] = {"python": sys.version.split()[0]}
    if args.trace.exists():
        out["virtual_hour_8_replicas"] = virtual_hour(args.trace)
    out["realtime_instant_chat"] = asyncio.run(realtime(args.requests))
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
