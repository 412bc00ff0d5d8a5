"""Replay of a day of recorded traffic (issue 14's figure: under 2 minutes).

Generates a day of traffic (100,000 requests by default: Poisson arrivals, five
tenants with Zipf shares, 20% batch, 70% streamed, conversations that share system
prompts and grow turn by turn, 2% refused by a limit) straight into a real SQLite
ledger through the sink, with the prefix fingerprints the gateway records, sets one
tenant's rpm limit in the metadata database, then times the whole command

    tokenplane replay --since 25h --config proposed.yaml --against current.yaml
                      --limits tighter.yaml --out DIR

in a subprocess (reading the ledger, admission under both configs, the simulated
cluster under both: 4 replicas against 3, SLOs, the diff). Prints one JSON document.

Usage: python bench/bench_replay.py [--requests 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from tokenplane.compose.config_file import validate_config
from tokenplane.meta.limit_store import LimitStore, LimitTarget
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.price_book import price_book
from tokenplane.metering.stores.open import open_sink

DAY = 86_400.0
BLOCK = 16


def config(replicas: int) -> dict[str, Any]:
    return {
        "models": [{
            "alias": "chat", "tokenizer": "cl100k_base", "context_window": 32768,
            "prices": {"input": "0.10", "cached_input": "0.05", "output": "0.40"},
            "backends": [{"type": "sim", "profile": "llama3-8b-a100", "replicas": replicas}],
        }],
        "tenants": [{"name": f"t{k}"} for k in range(5)],
        "slos": [
            {"name": "chat-availability", "selector": {"model": "chat"},
             "slis": [{"kind": "availability"}], "objective": 0.999, "window": "30d"},
            {"name": "chat-interactive", "selector": {"model": "chat",
                                                      "slo_class": "interactive"},
             "slis": [{"kind": "ttft", "threshold": "1s"},
                      {"kind": "tpot", "threshold": "100ms"}],
             "objective": 0.95, "window": "30d"},
        ],
    }


def generate(n: int, end: float, seed: int = 0) -> list[UsageEvent]:
    rng = random.Random(seed)
    prices = price_book(validate_config(config(1)).models)
    tenants = [f"t{k}" for k in range(5)]
    weights = [1 / (k + 1) for k in range(5)]
    systems = [(rng.getrandbits(62), rng.randint(100, 2000)) for _ in range(200)]
    convs: dict[int, list[tuple[int, int]]] = {}  # conversation -> segments so far
    rate = n / DAY
    t = end - DAY
    out: list[UsageEvent] = []
    for i in range(n):
        t += rng.expovariate(rate)
        tenant = rng.choices(tenants, weights)[0]
        cls = "batch" if rng.random() < 0.2 else "interactive"
        conv = rng.randrange(n // 8)
        segs = convs.get(conv)
        if segs is None or len(segs) > 12:
            sys_hash, sys_tokens = systems[conv % len(systems)]
            segs = [(sys_hash, sys_tokens)]
        user = rng.randint(20, 600)
        segs = [*segs, (rng.getrandbits(62), user)]
        convs[conv] = segs
        system = segs[0][1]
        history = sum(tok for _, tok in segs[1:-1])
        prompt = system + history + user
        blocks, done, used = [], 0, 0
        for h, tok in segs:
            used += tok
            end_blocks = used // BLOCK
            if end_blocks > done:
                blocks.append([h, end_blocks - done])
                done = end_blocks
        output = rng.randint(20, 500)
        stream = rng.random() < 0.7
        refused = rng.random() < 0.02
        ev = UsageEvent(
            request_id=f"r{i:07d}", attempt=0, ts=t, tenant=tenant, department="eng",
            app=f"app{rng.randrange(3)}", key_id=f"key_{tenant}", model="chat",
            backend="" if refused else "chat-0", stream=stream, arrival_ts=t,
            estimated_input_tokens=prompt, slo_class=cls,
        )
        if refused:
            ev.status, ev.http_status, ev.error_code = "error", 429, "rate_limit_exceeded"
        else:
            ttft = 0.05 + prompt * 7e-5
            ev.upstream_start_ts = t + 0.002
            ev.first_token_ts = t + ttft
            ev.last_token_ts = t + ttft + output * 0.012
            ev.ts = ev.last_token_ts + 0.001
            ev.input_system, ev.input_history, ev.input_user = system, history, user
            ev.input_tokens = prompt
            ev.cached_input_tokens = (system + history) // BLOCK * BLOCK if history else 0
            ev.output_tokens = output
            ev.prefix_segments = orjson.dumps(blocks).decode()
            prices.price(ev)
        out.append(ev)
    return out


async def write(home: Path, events: list[UsageEvent]) -> None:
    sink = await open_sink(str(home / "ledger.db"))
    try:
        for k in range(0, len(events), 5000):
            await sink.write(events[k:k + 5000])
    finally:
        await sink.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--keep", default=None, help="Keep the ledger and results here.")
    args = ap.parse_args()
    home = Path(args.keep or tempfile.mkdtemp(prefix="bench-replay-"))
    home.mkdir(parents=True, exist_ok=True)
    end = time.time() - 60
    t0 = time.perf_counter()
    events = generate(args.requests, end)
    asyncio.run(write(home, events))
    gen_s = time.perf_counter() - t0
    store = LimitStore(home / "meta.db")
    store.set(LimitTarget("t0"), {"rpm": 1000})
    store.close()
    for name, replicas in (("current", 4), ("proposed", 3)):
        (home / f"{name}.yaml").write_text(yaml.safe_dump(config(replicas)))
    (home / "tighter.yaml").write_text(yaml.safe_dump([{"tenant": "t0", "rpm": 8}]))
    cmd = [sys.executable, "-m", "tokenplane", "replay", "--since", "25h",
           "--config", str(home / "proposed.yaml"), "--against", str(home / "current.yaml"),
           "--limits", str(home / "tighter.yaml"), "--out", str(home / "out"),
           "--home", str(home)]
    t1 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t1
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr, file=sys.stderr)
        raise SystemExit(proc.returncode)
    res = json.loads((home / "out" / "replay.json").read_text())
    print(json.dumps({
        "requests": args.requests, "generate_and_write_s": round(gen_s, 1),
        "replay_wall_s": round(wall, 1), "under_2_minutes": wall < 120,
        "refused": {"recorded": res["recorded"]["totals"]["refused"],
                    "current": res["current"]["totals"]["refused"],
                    "proposed": res["proposed"]["totals"]["refused"]},
        "goodput_rps": {"current": res["current"]["goodput_rps"],
                        "proposed": res["proposed"]["goodput_rps"]},
        "slos": {"current": res["current"]["slos"], "proposed": res["proposed"]["slos"]},
        "stdout_head": proc.stdout.splitlines()[:1],
    }, indent=2))


if __name__ == "__main__":
    main()
