"""Limit accuracy: two gateway processes, 200 concurrent streams, one 10,000 TPM tenant.

Each run starts two worker processes (this file with ``--worker``) that share Redis,
releases them together, and reports the tokens billed in the window against the
limit and the documented bound ``C x G`` (docs/ADMISSION.md, section 4). The
baseline, in the same run, is the usual limiter: check a counter on arrival and add
the tokens after the response. Prints JSON with the worst overshoot of each.

    python bench/admission_accuracy.py [--runs 10] [--redis URL]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as aioredis

from tokenplane.admission import (
    Admission,
    Amounts,
    Denial,
    LimitTable,
    Parties,
    RedisStore,
    Scope,
    ScopeLimits,
)

TPM, G, NOW = 10_000, 16, 1_700_000_000.0


async def naive(ctl: aioredis.Redis, counter: str, rng: random.Random,
                res: dict[str, int]) -> None:
    """The baseline: check a counter on arrival, add the tokens after the response."""
    prompt, actual = rng.randint(20, 60), rng.randint(10, 80)
    rng.randint(0, 8)
    if int(await ctl.get(counter) or 0) >= TPM:
        res["denied"] += 1
        return
    res["inflight"] += 1
    res["max_inflight"] = max(res["max_inflight"], res["inflight"])
    for _ in range(actual):
        await asyncio.sleep(0)
    await ctl.incrby(counter, prompt + actual)
    res["inflight"] -= 1
    res["billed"] += prompt + actual


async def stream(adm: Admission, rng: random.Random, key: str, res: dict[str, int]) -> None:
    prompt, actual = rng.randint(20, 60), rng.randint(10, 80)
    predicted = max(0, actual - rng.randint(0, 8))
    scopes = Parties("acme", app="bench", key=key).scope_chain("m")
    grant = await adm.reserve(scopes, Amounts(1, prompt, predicted), NOW)
    if isinstance(grant, Denial):
        res["denied"] += 1
        return
    res["inflight"] += 1
    res["max_inflight"] = max(res["max_inflight"], res["inflight"])
    covered = generated = 0
    while generated < actual:
        await asyncio.sleep(0)
        generated += 1
        if generated - covered - predicted >= G:
            if not (await adm.debit(grant, G, NOW)).ok:
                break
            covered += G
    await adm.reconcile(grant, Amounts(1, prompt, generated), NOW)
    res["inflight"] -= 1
    res["billed"] += prompt + generated


async def worker(url: str, prefix: str, seed: int, mode: str) -> None:
    store = RedisStore.from_url(url, prefix=prefix, timeout_s=10)
    adm = Admission(LimitTable({Scope("tenant", "acme"): ScopeLimits(tpm=TPM)}), store)
    ctl = aioredis.Redis.from_url(url)
    await ctl.rpush(prefix + "ready", "1")
    await ctl.blpop([prefix + "go"], timeout=60)
    res = {"denied": 0, "inflight": 0, "max_inflight": 0, "billed": 0}
    rng = random.Random(seed)
    if mode == "naive":
        await asyncio.gather(*(naive(ctl, prefix + "naive", rng, res) for _ in range(100)))
    else:
        await asyncio.gather(*(stream(adm, rng, f"k{i % 5}", res) for i in range(100)))
    await ctl.aclose()
    await store.close()
    sys.stdout.write(orjson.dumps(res).decode() + "\n")


async def one_run(url: str, run: int, mode: str) -> dict[str, Any]:
    prefix = f"tp:bench-acc:{uuid.uuid4().hex[:8]}:"
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(Path(__file__).resolve()), "--worker", url, prefix,
            str(run * 2 + i), mode, stdout=asyncio.subprocess.PIPE)
        for i in range(2)
    ]
    ctl = aioredis.Redis.from_url(url)
    try:
        for _ in procs:
            await ctl.blpop([prefix + "ready"], timeout=60)
        await ctl.rpush(prefix + "go", "1", "1")
        outs = [orjson.loads((await p.communicate())[0]) for p in procs]
    finally:
        keys = [k async for k in ctl.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await ctl.delete(*keys)
        await ctl.aclose()
    billed = sum(o["billed"] for o in outs)
    concurrency = sum(o["max_inflight"] for o in outs)
    return {"billed": billed, "overshoot": billed - TPM, "bound": concurrency * G,
            "denied": sum(o["denied"] for o in outs)}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    runs = [await one_run(args.redis, i, "reserve") for i in range(args.runs)]
    base = [await one_run(args.redis, i, "naive") for i in range(args.runs)]
    worst = max(runs, key=lambda r: r["overshoot"])
    print(orjson.dumps({
        "limit_tpm": TPM, "granularity_G": G, "requests_per_run": 200, "processes": 2,
        "worst_overshoot": worst["overshoot"],
        "bound_at_worst": worst["bound"],
        "baseline_count_after_response_worst_overshoot": max(r["overshoot"] for r in base),
        "within_bound": all(r["overshoot"] <= r["bound"] for r in runs),
        "runs": runs,
    }, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        asyncio.run(worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
    else:
        asyncio.run(main())
