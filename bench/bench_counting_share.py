"""Counting's share of the gateway's CPU per request, for a ~2,000-token chat request
whose system prompt (and tools, history) the gateway has seen before. Prints JSON.

Both figures come from the same run:

- ``gateway_cpu_us_per_request``: a real gateway process (``tokenplane serve``) in front
  of the fast mock upstream (bench/mock_upstream.py), loaded by this process with
  distinct requests (same system prompt, tools and history; a new ~100-token user turn
  each); user + system CPU of the gateway process / requests served (bench_gateway.py's
  method).
- ``counting_us_per_request``: the gateway's own counting call
  (``ModelCounters.count``: by source, through the segment cache) on distinct requests of
  the same shape, the system prompt seen before, each new user turn tokenized.

``share = counting / gateway CPU``; target under 5%.

    python bench/bench_counting_share.py [--seconds 5] [--concurrency 16] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
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

from bench_gateway import cpu_seconds, free_port, run_and_print, wait_port  # noqa: E402
from bench_tokens import TOOLS, requests  # noqa: E402
from tokenplane.compose.config_file import validate_config  # noqa: E402
from tokenplane.operations.chat import CHAT  # noqa: E402
from tokenplane.tokens.model_counters import ModelCounters  # noqa: E402

CONFIG = """
models:
  - alias: m
    tokenizer: cl100k_base
    context_window: 8192
    prices: {{input: "0.10", output: "0.40"}}
    backends:
      - {{id: mock, type: vllm, base_url: "http://127.0.0.1:{up}", model: mock}}
tenants: [{{name: bench}}]
"""


def bodies(n: int) -> list[dict[str, Any]]:
    return [{"model": "m", "messages": msgs, "tools": TOOLS, "max_tokens": 64}
            for msgs in requests(n)]


def counting_us(reqs: list[dict[str, Any]], runs: int) -> tuple[float, int]:
    """Median over runs of the mean microseconds of ``ModelCounters.count`` per request;
    each run has a fresh cache warmed with one request (the system prompt seen before)."""
    cfg = validate_config({"models": [{"alias": "m", "tokenizer": "cl100k_base",
                                       "backends": [{"type": "sim"}]}]})
    model = cfg.models[0]
    out = []
    prompt = 0
    for _ in range(runs):
        counters = ModelCounters(cfg.models)
        prompt = counters.count(model, CHAT, reqs[0]).counts.prompt
        t0 = time.perf_counter()
        for body in reqs[1:]:
            counters.count(model, CHAT, body)
        out.append((time.perf_counter() - t0) / (len(reqs) - 1) * 1e6)
    return statistics.median(out), prompt


async def gateway_cpu_us(url: str, key: str, reqs: list[bytes], conc: int,
                         seconds: float, pid: int) -> tuple[float, float, int]:
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    served = 0
    it = iter(range(10**9))

    async def post(s: aiohttp.ClientSession) -> None:
        body = reqs[next(it) % len(reqs)]
        async with s.post(url + "/v1/chat/completions", data=body, headers=headers) as r:
            if r.status != 200:
                raise RuntimeError(f"HTTP {r.status}: {await r.text()}")
            await r.read()

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        for _ in range(conc * 4):  # warm up (the system prompt is now seen before)
            await post(s)
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal served
            while time.perf_counter() < stop:
                await post(s)
                served += 1

        t0, cpu0 = time.perf_counter(), cpu_seconds(pid)
        await asyncio.gather(*(worker() for _ in range(conc)))
        cpu, elapsed = cpu_seconds(pid) - cpu0, time.perf_counter() - t0
    return cpu / served * 1e6, served / elapsed, served


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    reqs = bodies(args.requests)
    encoded = [orjson.dumps(b) for b in reqs]
    with tempfile.TemporaryDirectory() as tmp:
        up, gw = free_port(), free_port()
        cfg = Path(tmp) / "gw.yaml"
        cfg.write_text(CONFIG.format(up=up))
        from tokenplane.meta.keystore import KeyStore

        home = Path(tmp) / "home"
        store = KeyStore(home / "meta.db")
        key, _ = store.create_key("bench", app="bench")
        store.close()
        env = {**os.environ, "TOKENPLANE_HOME": str(home)}
        procs = [subprocess.Popen([sys.executable, str(HERE / "mock_upstream.py"), str(up)]),
                 subprocess.Popen([sys.executable, "-m", "tokenplane", "serve", "--config",
                                   str(cfg), "--port", str(gw)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        try:
            wait_port(up, procs[0])
            wait_port(gw, procs[1])
            rounds = []
            for _ in range(args.rounds):
                cpu_us, rps, n = await gateway_cpu_us(f"http://127.0.0.1:{gw}", key, encoded,
                                                      args.concurrency, args.seconds,
                                                      procs[1].pid)
                count_us, prompt = counting_us(reqs, 3)
                rounds.append({"gateway_cpu_us_per_request": cpu_us, "gateway_rps": rps,
                               "requests": n, "counting_us_per_request": count_us,
                               "share": count_us / cpu_us})
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(30)
    med = {k: round(statistics.median(r[k] for r in rounds), 4) for k in rounds[0]}
    return {"bench": "counting_share", "prompt_tokens": prompt, "rounds": rounds,
            "median": med, "target_share": 0.05, "meets_target": med["share"] < 0.05,
            "cpus": os.cpu_count(), "loadavg": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--out", type=Path)
    run_and_print(main_async, ap.parse_args())


if __name__ == "__main__":
    main()
