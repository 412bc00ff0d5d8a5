"""Benchmark of the simulated engine (tokenplane.engine); prints JSON.

1. Virtual time: one hour of the Azure LLM 2023 conversation trace (Patel et al.,
   "Splitwise", ISCA 2024; CC-BY 4.0, processed copy from microsoft/vidur) on 8
   llama3-8b-a100 engines, requests assigned round-robin. Budget: 120 s of wall time.
   Baseline in the same run: a bare Python loop over the same number of steps
   (the floor any per-step Python code pays).
2. Real time: concurrent non-streaming chat requests through EngineService.handle on
   the ``instant`` profile. Baseline in the same run: the same number of
   orjson-encoded bodies alone.
3. ``--features``: the same, one figure per request shape the engine honours beyond
   length (stop, n=4, seed, logprobs, json_object, json_schema, required tool calls),
   next to the plain one; median of 3 runs each (an engine without a feature ignores
   its field: run it on the commit before to see what the feature costs).

Run: python bench/bench_engine.py [--requests N] [--trace PATH] [--features]
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


_PARAMS = {"type": "object", "required": ["city", "days"], "properties": {
    "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}}
_SCHEMA = {"type": "object", "required": ["name", "tags", "home"], "properties": {
    "name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"},
                                         "minItems": 1, "maxItems": 3},
    "home": {"$ref": "#/$defs/Place"}},
    "$defs": {"Place": {"type": "object", "required": ["city", "since"], "properties": {
        "city": {"type": "string"}, "since": {"type": "string", "format": "date"}}}}}
FEATURES: dict[str, dict[str, object]] = {
    "plain": {},
    "stop": {"stop": ["\n\n", "END"]},
    "n4": {"n": 4},
    "seed": {"seed": 7, "temperature": 0.7},
    "logprobs_top5": {"logprobs": True, "top_logprobs": 5},
    "json_object": {"response_format": {"type": "json_object"}},
    "json_schema": {"response_format": {"type": "json_schema",
                                        "json_schema": {"name": "p", "schema": _SCHEMA}}},
    "tools_required": {"tools": [{"type": "function", "function": {
        "name": "forecast", "parameters": _PARAMS}}], "tool_choice": "required"},
}


async def realtime_features(n: int) -> dict[str, dict[str, float]]:
    """Requests per second through EngineService.handle, per request shape (no
    max_tokens: each shape ends where it ends naturally)."""
    tok = default_tokenizer()
    out: dict[str, dict[str, float]] = {}
    for name, extra in FEATURES.items():
        bodies = [orjson.dumps({"model": "sim", **extra, "messages": [
            {"role": "user", "content": f"question {i}"}]}) for i in range(n)]
        rates = []
        tokens = 0
        for _ in range(3):
            svc = EngineService(get_profile("instant"), tok, simple_prompt_ids(tok), "sim")
            await svc.start()
            t0 = time.perf_counter()
            resps = await asyncio.gather(*(svc.handle("POST", "/v1/chat/completions", b, {})
                                           for b in bodies))
            wall = time.perf_counter() - t0
            await svc.close()
            if any(r.status != 200 for r in resps):  # an engine without the feature
                break
            tokens = sum(orjson.loads(r.body or b"{}")["usage"]["completion_tokens"]
                         for r in resps)
            rates.append(n / wall)
        if not rates:
            out[name] = {"refused": 1.0}
            continue
        rates.sort()
        out[name] = {"req_per_s": round(rates[1], 1),
                     "completion_tokens_per_req": round(tokens / n, 1)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--features", action="store_true")
    args = parser.parse_args()
    out: dict[str, object] = {"python": sys.version.split()[0]}
    if args.trace.exists():
        out["virtual_hour_8_replicas"] = virtual_hour(args.trace)
    out["realtime_instant_chat"] = asyncio.run(realtime(args.requests))
    if args.features:
        out["realtime_features"] = asyncio.run(realtime_features(args.requests // 4))
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
