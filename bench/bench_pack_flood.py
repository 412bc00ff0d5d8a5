"""Other clients' latency while 16 connections flood ``POST /v1/context/pack`` with
3.8 MB bodies (issue 33, finding 1: before the fix, 256 documents of 14 KB per call
took other tenants from p50/p99 13/22 ms to 268/1,237 ms with 16 connections).

A gateway (``tokenplane serve``) in front of the fast mock upstream of
``bench_gateway.py`` serves ``--victims`` clients of one tenant sending small chat
requests, first alone (baseline), then while ``--connections`` connections of another
tenant each send pack calls back to back: ``--docs`` documents of ``--kb`` KB (each
call different, so no analysis cache helps), ``budget_tokens`` 2,000. The gateway's
``context.max_characters`` is raised to let the bodies through, so every call is
packed (the worst case: the attacker has no limit). Scenario ``rpm5``: the attacker's
tenant has ``rpm 5``, so all but five calls a minute are refused with 429.

Prints JSON: per scenario and phase the victims' p50 / p99 and requests per second,
and the attacker's answers (status counts, p50); the ratio of the victims' p50 under
the flood to their p50 alone, measured back to back on the same gateway, its median
over ``--repeat`` runs. ``--baseline TREE`` runs the same against the gateway of
another checkout (``TREE/src``), alternating with this one, in the same run. The
flood runs in a process of its own so that its sending does not delay the victims'
client.

    python bench/bench_pack_flood.py [--seconds 8] [--connections 16] [--docs 256]
        [--kb 14.8] [--victims 4] [--repeat 3] [--baseline TREE] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_gateway import free_port, wait_port  # noqa: E402

CONFIG = """
models:
  - alias: m
    tokenizer: cl100k_base
    context_window: 131072
    prices: {{input: "0.10", output: "0.40"}}
    backends:
      - {{id: mock, type: vllm, base_url: "http://127.0.0.1:{up}", model: mock}}
tenants: [{{name: victim}}, {{name: attacker}}]
server: {{max_body_bytes: 16000000}}
"""
# the bound on characters (a tree before the fix has no such option: it has no bound)
BOUND = "context: {max_characters: 8000000}\n"
SCENARIOS = {"unlimited": None, "rpm5": 5}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(1e3 * values[min(len(values) - 1, int(len(values) * q))], 1) if values else 0.0


def start_gateway(tmp: Path, name: str, up: int, src: Path | None, rpm: int | None
                  ) -> tuple[subprocess.Popen[bytes], int, dict[str, str]]:
    from tokenplane.meta.keystore import KeyStore
    from tokenplane.meta.limit_store import LimitStore, LimitTarget

    home = tmp / name
    store = KeyStore(home / "meta.db")
    keys = {t: store.create_key(t, app="bench")[0] for t in ("victim", "attacker")}
    store.close()
    if rpm is not None:
        limits = LimitStore(home / "meta.db")
        limits.set(LimitTarget("attacker"), {"rpm": rpm})
        limits.close()
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(CONFIG.format(up=up) + (BOUND if src is None else ""))
    port = free_port()
    env = {**os.environ, "TOKENPLANE_HOME": str(home)}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenplane", "serve", "--config", str(cfg), "--port",
         str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, port, keys


def pack_body(n: int, docs: int, kb: float) -> bytes:
    words = ("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod "
             "tempor incididunt ut labore et dolore magna aliqua. ")
    size = int(kb * 1000)
    items = []
    for i in range(docs):
        head = f"call {n} document {i} salt {n * 7919 + i}. "
        items.append({"id": f"d{i}", "text": (head + words * (size // len(words) + 1))[:size]})
    return orjson.dumps({"model": "m", "query": "lorem dolor", "documents": items,
                         "budget_tokens": 2000})


async def victims_phase(base: str, key: str, seconds: float, victims: int
                        ) -> dict[str, Any]:
    lat: list[float] = []
    errors: collections.Counter[int] = collections.Counter()
    stop = time.perf_counter() + seconds
    vh = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    counter = iter(range(10**9))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=300)) as s:
        async def victim() -> None:
            while time.perf_counter() < stop:
                text = f"Say hello in one word please. ({next(counter)})"
                body = orjson.dumps({"model": "m", "max_tokens": 16, "messages": [
                    {"role": "user", "content": text}]})
                t0 = time.perf_counter()
                async with s.post(f"{base}/chat/completions", data=body, headers=vh) as r:
                    await r.read()
                    if r.status != 200:  # (the gateway before the fix: 503s, its loop
                        errors[r.status] += 1  # held past the upstream's connect timeout)
                lat.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(victim() for _ in range(victims)))
        elapsed = time.perf_counter() - t0
    return {"victim_p50_ms": pct(lat, 0.5), "victim_p99_ms": pct(lat, 0.99),
            "victim_rps": round(len(lat) / elapsed, 1), "victim_n": len(lat),
            "victim_errors": {str(k): v for k, v in sorted(errors.items())}}


async def attack_phase(base: str, key: str, seconds: float, connections: int,
                       attack: list[bytes]) -> dict[str, Any]:
    """The flood, run in a process of its own (``--attack``): its sending of 60 MB at
    a time must not delay the victims' client loop."""
    attack_lat: list[float] = []
    statuses: collections.Counter[int] = collections.Counter()
    stop = time.perf_counter() + seconds
    ah = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=300)) as s:
        async def attacker(k: int) -> None:
            n = k
            while time.perf_counter() < stop:
                body = attack[n % len(attack)]
                n += connections
                t0 = time.perf_counter()
                async with s.post(f"{base}/context/pack", data=body, headers=ah) as r:
                    await r.read()
                    statuses[r.status] += 1
                attack_lat.append(time.perf_counter() - t0)

        await asyncio.gather(*(attacker(k) for k in range(connections)))
    return {"attack_statuses": {str(k): v for k, v in sorted(statuses.items())},
            "attack_p50_ms": pct(attack_lat, 0.5)}


async def phase(base: str, keys: dict[str, str], seconds: float, victims: int,
                args: argparse.Namespace | None) -> dict[str, Any]:
    """The victims alone, or beside the flood (``args``) from another process."""
    if args is None:
        return await victims_phase(base, keys["victim"], seconds, victims)
    flood = subprocess.Popen(
        [sys.executable, __file__, "--attack", base, keys["attacker"], "--seconds",
         str(seconds + 2), "--connections", str(args.connections), "--docs", str(args.docs),
         "--kb", str(args.kb), "--bodies", str(args.bodies)], stdout=subprocess.PIPE)
    assert flood.stdout is not None
    flood.stdout.readline()  # its bodies are built: the flood starts
    await asyncio.sleep(2.0)  # the flood under way
    out = await victims_phase(base, keys["victim"], seconds, victims)
    text, _ = await asyncio.to_thread(flood.communicate)
    return {**out, **orjson.loads(text)}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    body_mb = round(len(pack_body(0, args.docs, args.kb)) / 1e6, 2)
    trees: dict[str, Path | None] = {"gateway": None}
    if args.baseline is not None:
        trees["gateway-base"] = args.baseline / "src"
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        up = free_port()
        upstream = subprocess.Popen([sys.executable, str(HERE / "mock_upstream.py"), str(up)])
        procs = [upstream]
        try:
            wait_port(up, upstream)
            for rep in range(args.repeat):
                for scenario, rpm in SCENARIOS.items():
                    for tree, src in trees.items():  # alternating, same run
                        name = f"{scenario}/{tree}"
                        proc, port, keys = start_gateway(Path(tmp), f"{tree}-{scenario}-{rep}",
                                                         up, src, rpm)
                        procs.append(proc)
                        base = f"http://127.0.0.1:{port}/v1"
                        await phase(base, keys, 1.0, args.victims, None)  # warm up
                        calm = await phase(base, keys, args.seconds, args.victims, None)
                        hit = await phase(base, keys, args.seconds, args.victims, args)
                        ratio = round(hit["victim_p50_ms"] / max(calm["victim_p50_ms"], 0.1),
                                      2)
                        res = {"baseline": calm, "attack": hit, "p50_ratio": ratio}
                        runs.setdefault(name, []).append(res)
                        print(f"{name} #{rep}: {res}", file=sys.stderr)
                        proc.terminate()
                        proc.wait(30)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                    p.wait(30)
    results: dict[str, Any] = {}
    for name, rs in runs.items():
        results[name] = {
            "median_p50_ratio": statistics.median(r["p50_ratio"] for r in rs),
            "median_victim_p50_ms": [statistics.median(r[k]["victim_p50_ms"] for r in rs)
                                     for k in ("baseline", "attack")],
            "median_victim_p99_ms": [statistics.median(r[k]["victim_p99_ms"] for r in rs)
                                     for k in ("baseline", "attack")],
            "runs": rs}
    return {"connections": args.connections, "docs": args.docs, "kb": args.kb,
            "body_mb": body_mb, "victims": args.victims,
            "seconds": args.seconds, "repeat": args.repeat, "results": results}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--docs", type=int, default=256)
    ap.add_argument("--kb", type=float, default=14.8)
    ap.add_argument("--bodies", type=int, default=32)
    ap.add_argument("--victims", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--attack", nargs=2, metavar=("BASE_URL", "KEY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    import uvloop

    if args.attack is not None:
        # distinct bodies (the analysis cache cannot help), built before the flood
        attack = [pack_body(n, args.docs, args.kb) for n in range(args.bodies)]
        print("ready", flush=True)
        res = uvloop.run(attack_phase(args.attack[0], args.attack[1], args.seconds,
                                      args.connections, attack))
        print(orjson.dumps(res).decode(), flush=True)
        return

    out = uvloop.run(main_async(args))
    text = orjson.dumps(out, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
