"""What recomputing the advice document costs the requests a gateway serves meanwhile.

Serves a data directory whose ledger holds a million events (``bench_advice.py
--ledger DIR/ledger.db --end-now``) with ``tokenplane serve`` (one simulated instant
engine) and sends chat completions at ``--concurrency`` for ``--seconds`` per phase,
alternating *quiet* phases with *refreshing* ones, in which a client asks ``GET
/admin/v1/advice`` back to back for windows not asked before, so every tenant's
document is computed the whole phase long (the console's keeper does it once every 5
minutes). Run with ``PYTHONPATH=<tree>/src`` to time another tree's gateway.
Reports each phase's request latency (p50, p99, max) and throughput, and
how many documents were computed. Prints JSON.

    python bench/bench_advice_keeper.py --home DIR [--rounds 3] [--seconds 10]
                                        [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tokenplane.meta.keystore import KeyStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_console import CONFIG, Server

BODY = {"model": "m0", "max_tokens": 16,
        "messages": [{"role": "user", "content": "How far is the moon?"}]}


async def traffic(base: str, key: str, seconds: float, concurrency: int) -> list[float]:
    times: list[float] = []
    end = time.perf_counter() + seconds
    headers = {"authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as client:
        async def one() -> None:
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                r = await client.post("/v1/chat/completions", json=BODY)
                times.append((time.perf_counter() - t0) * 1000)
                assert r.status_code == 200, r.text[:300]
        await asyncio.gather(*(one() for _ in range(concurrency)))
    return times


async def refreshing(base: str, key: str, stop: asyncio.Event) -> int:
    """Documents computed back to back: each a window not asked before (a ``since``
    a minute earlier each time: any tree's route computes it), about 30 days long."""
    made = 0
    headers = {"authorization": f"Bearer {key}"}
    since = int(time.time()) - 30 * 86400
    async with httpx.AsyncClient(base_url=base, timeout=120, headers=headers) as client:
        while not stop.is_set():
            r = await client.get("/admin/v1/advice", params={"since": str(since - 60 * made)})
            assert r.status_code == 200, r.text[:300]
            made += 1
    return made


def summary(times: list[float], seconds: float) -> dict[str, Any]:
    times.sort()
    return {"requests": len(times), "per_s": round(len(times) / seconds, 1),
            "p50_ms": round(statistics.median(times), 2),
            "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2),
            "max_ms": round(times[-1], 2)}


async def phase(base: str, key: str, admin: str, seconds: float, concurrency: int,
                refresh: bool) -> dict[str, Any]:
    stop = asyncio.Event()
    refresher = asyncio.create_task(refreshing(base, admin, stop)) if refresh else None
    times = await traffic(base, key, seconds, concurrency)
    stop.set()
    out = summary(times, seconds)
    if refresher is not None:
        out["documents_computed"] = await refresher
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    keys = KeyStore(args.home / "meta.db")
    admin, _ = keys.create_key("ops", admin=True)
    user, _ = keys.create_key("t1", app="bench")
    keys.close()
    (args.home / "gw.yaml").write_text(CONFIG)
    out: dict[str, Any] = {"quiet": [], "refreshing": []}
    with Server(args.home) as server:
        base = server.base
        # the start's own computation (where there is one) done: the default document
        httpx.get(base + "/admin/v1/advice", timeout=120,
                  headers={"authorization": f"Bearer {admin}"})
        for r in range(args.rounds):
            for refresh in (r % 2 == 1, r % 2 == 0):
                name = "refreshing" if refresh else "quiet"
                out[name].append(asyncio.run(phase(base, user, admin, args.seconds,
                                                   args.concurrency, refresh)))
    out["load_average"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
