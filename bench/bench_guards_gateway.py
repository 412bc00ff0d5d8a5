"""Added latency of the governance guards through a real gateway.

Three gateways in this process, each in front of an instant simulated engine:
governance disabled (the baseline), the default policy (PII log, injection flag,
redacted audit) and a tokenizing policy (placeholders restored in the answer).
Sequential requests (a ~2 KB chat, unique per request), non-stream and stream,
rounds interleaved; prints p50 latency per configuration and the difference.

Run: python bench/bench_guards_gateway.py [--requests 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench_guards import body
from tokenplane.app import GATEWAY_KEY, build_app
from tokenplane.compose.config_file import validate_config

CONFIGS: dict[str, dict[str, Any] | None] = {
    "disabled": {"enabled": False},
    "default": None,
    "tokenize": {"pii": {"prompt": {"default": "tokenize"}}},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start(home: Path, governance: dict[str, Any] | None) -> tuple[web.AppRunner, str, str]:
    cfg: dict[str, Any] = {
        "data_dir": str(home),
        "models": [{"alias": "m", "tokenizer": "cl100k_base", "context_window": 8192,
                    "backends": [{"type": "sim", "profile": "instant", "replicas": 1}]}],
        "tenants": [{"name": "t"}],
    }
    if governance is not None:
        cfg["governance"] = governance
    app = build_app(validate_config(cfg))
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    key, _ = app[GATEWAY_KEY].keys.create_key("t")
    return runner, f"http://127.0.0.1:{port}/v1/chat/completions", key


async def run(session: aiohttp.ClientSession, url: str, key: str, n: int, offset: int,
              stream: bool) -> list[float]:
    out = []
    headers = {"authorization": f"Bearer {key}"}
    for i in range(n):
        b = {**body(offset + i), "max_tokens": 16, "stream": stream}
        t = time.perf_counter()
        async with session.post(url, json=b, headers=headers) as r:
            await r.read()
            assert r.status == 200, r.status
        out.append(time.perf_counter() - t)
    return out


async def main(n: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        servers = {name: await start(Path(tmp) / name, gov) for name, gov in CONFIGS.items()}
        samples: dict[str, list[float]] = {f"{name}/{mode}": [] for name in CONFIGS
                                           for mode in ("json", "stream")}
        async with aiohttp.ClientSession() as session:
            for _, url, key in servers.values():  # warm up
                await run(session, url, key, 20, 10**6, False)
            for r in range(rounds):
                for name, (_, url, key) in servers.items():
                    for mode in ("json", "stream"):
                        samples[f"{name}/{mode}"] += await run(
                            session, url, key, n, r * n, mode == "stream")
        for runner, _, _ in servers.values():
            await runner.cleanup()
    p50 = {k: round(statistics.median(v) * 1e3, 3) for k, v in samples.items()}
    result: dict[str, Any] = {"requests_per_config": n * rounds, "p50_ms": p50}
    result["added_ms"] = {
        f"{name}/{mode}": round(p50[f"{name}/{mode}"] - p50[f"disabled/{mode}"], 3)
        for name in CONFIGS if name != "disabled" for mode in ("json", "stream")}
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main(args.requests, args.rounds)), indent=2))
