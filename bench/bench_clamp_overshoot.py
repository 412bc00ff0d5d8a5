"""Tokens billed against a TPM limit by concurrent mixed traffic, with
``clamp_max_tokens`` off and on (issue 33, finding 2: the clamp used to give each
concurrent request the whole remaining budget: 57,334 tokens billed against a TPM of
10,000, +473 %, against +100.6 % without it).

Two gateway processes (``tokenplane serve``) share the real Redis (a fresh key
prefix each run) and one tenant's ``tpm`` of ``--limit`` tokens; a simulated model
(``instant`` profile: answers at once, so every request is in flight together) with
a 32,768-token window, larger than the limit. ``--requests`` requests start at once,
alternating between the two gateways, a quarter each: not streamed without
``max_tokens``, not streamed with ``max_tokens`` 900, streamed without, streamed
with 300 (``include_usage``). The whole run sits inside one 60 s window, so the
tokens the two ledgers bill (prompt + output, every request) are what the window
holds; the overshoot is that less the limit. Runs: ``off`` (clamp off, the default
prediction of 64 output tokens reserved), ``on`` (this tree), and with ``--baseline
TREE`` ``on-base`` (the clamp of another checkout, ``TREE/src``). ``--repeat`` runs of
each, alternating; medians reported.

The bound with the clamp (docs/ADMISSION.md, 4.2): every request a token limit
applies to reserves its whole (clamped) ``max_tokens``, so none can use more than it
was granted and the window holds at most the limit (plus ε, the error of an
estimated prompt count: 0 with the model's tokenizer, as here). Without the clamp:
``C x E_max``, with ``E_max`` the most one request can use beyond its reservation.

    python bench/bench_clamp_overshoot.py [--limit 10000] [--requests 120]
        [--repeat 3] [--baseline TREE] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_gateway import free_port  # noqa: E402

MODEL = "sim-m"
REDIS = os.environ.get("TOKENPLANE_TEST_REDIS", "redis://127.0.0.1:6379/0")
MESSAGES = [{"role": "user", "content": "Write about tokens and budgets."}]


def config(home: Path, prefix: str, clamp: bool) -> Path:
    cfg = {
        "data_dir": str(home), "redis_url": REDIS,
        "admission": {"key_prefix": prefix, "predict_output": False, "timeout_s": 5.0,
                      "default_output_tokens": 64, "replicas": 2, "clamp_max_tokens": clamp},
        "models": [{"alias": MODEL, "tokenizer": "cl100k_base", "chat_template": "llama3",
                    "context_window": 32768, "prices": {"input": "0.10", "output": "0.40"},
                    "backends": [{"id": "sim", "type": "sim", "profile": "instant",
                                  "replicas": 2}]}],
        "tenants": [{"name": "bench"}],
        "observe": {"metrics": {"listen": None}, "access_log": {"enabled": False}},
    }
    path = home / "gateway.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


async def serve(cfg: Path, src: Path | None) -> tuple[asyncio.subprocess.Process, int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "TOKENPLANE_REDIS_URL"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tokenplane", "serve", "--config", str(cfg), "--port",
        str(port), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env=env)
    assert proc.stdout is not None
    while b"tokenplane gateway on" not in await asyncio.wait_for(proc.stdout.readline(), 60):
        pass
    return proc, port


async def one(s: aiohttp.ClientSession, url: str, key: str, i: int) -> int:
    body: dict[str, Any] = {"model": MODEL, "messages": MESSAGES}
    kind = i % 4
    if kind == 1:
        body["max_tokens"] = 900
    if kind in (2, 3):
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if kind == 3:
        body["max_tokens"] = 300
    async with s.post(f"{url}/chat/completions", json=body,
                      headers={"authorization": f"Bearer {key}"}) as r:
        await r.read()
        return r.status


async def run(args: argparse.Namespace, clamp: bool, src: Path | None) -> dict[str, Any]:
    from tokenplane.meta.keystore import KeyStore
    from tokenplane.meta.limit_store import LimitStore, LimitTarget

    prefix = f"bench:clamp:{uuid.uuid4().hex[:8]}:"
    with tempfile.TemporaryDirectory() as tmp:
        homes = [Path(tmp) / "a", Path(tmp) / "b"]
        homes[0].mkdir()
        store = KeyStore(homes[0] / "meta.db")
        key = store.create_key("bench", app="a")[0]
        store.close()
        limits = LimitStore(homes[0] / "meta.db")
        limits.set(LimitTarget("bench"), {"tpm": args.limit})
        limits.close()
        homes[1].mkdir()
        for f in ("meta.db",):
            (homes[1] / f).write_bytes((homes[0] / f).read_bytes())
        procs = [await serve(config(h, prefix, clamp), src) for h in homes]
        try:
            urls = [f"http://127.0.0.1:{port}/v1" for _, port in procs]
            t0 = time.perf_counter()
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                             timeout=aiohttp.ClientTimeout(total=120)) as s:
                statuses = await asyncio.gather(*(one(s, urls[i % 2], key, i)
                                                  for i in range(args.requests)))
            elapsed = time.perf_counter() - t0
        finally:
            for proc, _ in procs:
                proc.send_signal(signal.SIGTERM)  # drains the journal into the ledger
                await proc.wait()
        billed = 0
        for h in homes:
            db = sqlite3.connect(h / "ledger.db")
            billed += db.execute("SELECT COALESCE(SUM(input_tokens + output_tokens), 0) "
                                 "FROM usage_events WHERE tenant = 'bench'").fetchone()[0]
            db.close()
    ok = sum(1 for st in statuses if st == 200)
    return {"billed": billed, "overshoot_pct": round(100 * (billed - args.limit) / args.limit,
                                                      1),
            "served": ok, "refused": len(statuses) - ok,
            "other": sorted({st for st in statuses if st not in (200, 429)}),
            "elapsed_s": round(elapsed, 1)}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, tuple[bool, Path | None]] = {"off": (False, None), "on": (True, None)}
    if args.baseline is not None:
        runs["on-base"] = (True, args.baseline / "src")
    got: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
    for _ in range(args.repeat):
        for name, (clamp, src) in runs.items():
            res = await run(args, clamp, src)
            print(f"{name}: {res}", file=sys.stderr)
            got[name].append(res)
    out: dict[str, Any] = {}
    for name, results in got.items():
        out[name] = {"median_billed": statistics.median(r["billed"] for r in results),
                     "median_overshoot_pct": statistics.median(r["overshoot_pct"]
                                                               for r in results),
                     "max_overshoot_pct": max(r["overshoot_pct"] for r in results),
                     "runs": results}
    return {"limit": args.limit, "requests": args.requests, "repeat": args.repeat,
            "results": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=120)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    out = asyncio.run(main_async(args))
    text = orjson.dumps(out, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
