"""Response cache figures (docs/BENCHMARKS.md, "Caches").

1. Hit path: a real gateway (HTTP front, full pipeline) answering a cached answer,
   against the same gateway without a cache relaying the same answer from an
   upstream that returns it at once (bench/mock_upstream.py, in this process):
   p50 of each, sequential requests, non-stream and stream (64 tokens). "Added" is
   hit minus relay. Also the cache stage's own time on an exact hit (lookup and
   replay set-up, in-process).
2. Semantic lookup over 100k cached entries: the embedded store's nearest-row search
   in one partition of 100k rows (the worst case: every entry one tenant's app with
   one system prompt), and over 100 partitions of 1k; the embedding of a user turn
   is timed apart.
3. Precision and recall of the semantic cache on bench/data/paraphrases.tsv per
   threshold, English and Chinese.

Run: python bench/bench_cache.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiohttp import web

from tokenplane.api.front.server import GatewayServer
from tokenplane.app import GATEWAY_KEY, build_app
from tokenplane.cache.entry import Entry
from tokenplane.cache.keys import comparable, numbers
from tokenplane.cache.memory_store import MemoryStore
from tokenplane.compose.config_file import validate_config
from tokenplane.config.cache_schema import SHIPPED_THRESHOLD
from tokenplane.embeddings.model import UseEmbedder, normalised

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mock_upstream import build as build_mock

DATA = Path(__file__).resolve().parent / "data" / "paraphrases.tsv"


def p50_ms(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 3)


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _gateway(home: Path, upstream: str, cache: bool) -> tuple[GatewayServer, str, int]:
    cfg: dict[str, Any] = {
        "data_dir": str(home), "observe": {"metrics": {"listen": None},
                                           "access_log": {"enabled": False}},
        "models": [{"alias": "m", "tokenizer": "cl100k_base", "context_window": 8192,
                    "prices": {"input": "0.10", "output": "0.40"},
                    "backends": [{"type": "openai", "base_url": upstream, "model": "mock"}]}],
        "tenants": [{"name": "t"}],
    }
    if cache:
        cfg["cache"] = {"exact": {"enabled": True}}
    app = build_app(validate_config(cfg))
    port = _free_port()
    server = GatewayServer(app, "127.0.0.1", port)
    await server.start()
    key, _ = app[GATEWAY_KEY].keys.create_key("t", app="bench")
    return server, key, port


async def _timed(session: aiohttp.ClientSession, url: str, key: str, body: dict[str, Any],
                 n: int, expect_hit: bool) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        async with session.post(url, json=body, headers={"authorization": f"Bearer {key}"}
                                ) as resp:
            await resp.read()
            assert resp.status == 200
            assert (resp.headers.get("x-tokenplane-cache") == "exact") == expect_hit
        out.append(time.perf_counter() - t)
    return out


async def hit_path(n: int) -> dict[str, Any]:
    runner = web.AppRunner(build_mock(), access_log=None)
    await runner.setup()
    mport = _free_port()
    await web.TCPSite(runner, "127.0.0.1", mport).start()
    upstream = f"http://127.0.0.1:{mport}/v1"
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        plain, pkey, pport = await _gateway(Path(tmp) / "plain", upstream, cache=False)
        cached, ckey, cport = await _gateway(Path(tmp) / "cached", upstream, cache=True)
        try:
            async with aiohttp.ClientSession() as s:
                for stream in (False, True):
                    body: dict[str, Any] = {
                        "model": "m", "temperature": 0, "max_tokens": 64, "stream": stream,
                        "messages": [{"role": "user", "content": "Summarise the plan."}]}
                    if stream:
                        body["stream_options"] = {"include_usage": True}
                    purl = f"http://127.0.0.1:{pport}/v1/chat/completions"
                    curl = f"http://127.0.0.1:{cport}/v1/chat/completions"
                    await _timed(s, purl, pkey, body, 50, False)  # warm up
                    await _timed(s, curl, ckey, body, 1, False)  # the miss that fills
                    await _timed(s, curl, ckey, body, 50, True)
                    relay, hit = [], []
                    for _ in range(5):  # interleaved rounds
                        relay += await _timed(s, purl, pkey, body, n // 5, False)
                        hit += await _timed(s, curl, ckey, body, n // 5, True)
                    name = "stream" if stream else "non_stream"
                    results[name] = {"relay_p50_ms": p50_ms(relay), "hit_p50_ms": p50_ms(hit),
                                     "added_p50_ms": round(p50_ms(hit) - p50_ms(relay), 3)}
        finally:
            await plain.stop()
            await cached.stop()
            await runner.cleanup()
    return results


def stage_time(n: int) -> dict[str, Any]:
    """The cache's own work on an exact hit: key, lookup, replay set-up."""
    from prometheus_client import CollectorRegistry

    from tokenplane.cache.gateway.embedded import EmbeddedStore
    from tokenplane.cache.gateway.service import ResponseCache
    from tokenplane.config.cache_schema import CacheConfig

    cache = ResponseCache(CacheConfig(), EmbeddedStore(1000, 1000, 512), None,
                          CollectorRegistry(), lambda a: "")
    body = {"model": "m", "temperature": 0, "max_tokens": 64, "messages": [
        {"role": "system", "content": "You are terse. " * 40},
        {"role": "user", "content": "Summarise the plan."}]}

    async def run() -> list[float]:
        hit, fill = await cache.lookup("t", "a", "m", "chat", body, False, time.time())
        assert fill is not None
        await cache.fill(fill, "r1", False, (b'{"choices":[],"usage":{"prompt_tokens":3,'
                                              b'"completion_tokens":4}}',), time.time())
        out = []
        for _ in range(n):
            t = time.perf_counter()
            hit, _ = await cache.lookup("t", "a", "m", "chat", body, False, time.time())
            out.append(time.perf_counter() - t)
            assert hit is not None
        return out

    xs = asyncio.run(run())
    return {"exact_lookup_p50_us": round(statistics.median(xs) * 1e6, 1)}


def semantic_lookup(rows: int, queries: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    vecs = normalised(rng.standard_normal((rows, 512)))
    out: dict[str, Any] = {}
    for parts in (1, 100):
        store = MemoryStore(10, rows, 512)
        per = rows // parts
        for p in range(parts):
            block = vecs[p * per:(p + 1) * per]
            store.put_semantic(f"p{p}", block, [Entry(f"r{p}-{i}", "t", "a", False, (b"{}",),
                                                      1, 1, 0.0, 1e12) for i in range(per)])
        times, hits = [], 0
        for q in range(queries):
            p = q % parts
            target = vecs[p * per + int(rng.integers(per))]
            noise = normalised((target + 0.15 * rng.standard_normal(512) / np.sqrt(512)
                                ).reshape(1, -1))[0]
            t = time.perf_counter()
            found = store.nearest(f"p{p}", noise, SHIPPED_THRESHOLD, 1.0)
            times.append(time.perf_counter() - t)
            hits += found is not None
        out[f"{parts}x{per}"] = {"p50_ms": p50_ms(times), "p99_ms": round(
            float(np.percentile(times, 99)) * 1000, 3), "found": f"{hits}/{queries}"}
    return out


def precision(embedder: UseEmbedder) -> dict[str, Any]:
    rows = [line.split("\t") for line in DATA.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]
    a = embedder.embed([comparable(r[2]) for r in rows])
    b = embedder.embed([comparable(r[3]) for r in rows])
    scores = (a * b).sum(axis=1)
    labels = np.array([int(r[1]) for r in rows])
    langs = np.array([r[0] for r in rows])
    same = np.array([numbers(comparable(r[2])) == numbers(comparable(r[3])) for r in rows])
    table: dict[str, Any] = {"pairs": len(rows), "positives": int(labels.sum())}
    for th in (0.85, 0.88, 0.9, 0.92, 0.94):
        row: dict[str, Any] = {}
        unguarded = (scores >= th)
        tp = int((unguarded & (labels == 1)).sum())
        row["all_without_number_guard"] = {
            "precision": round(tp / max(1, int(unguarded.sum())), 3),
            "false_hits": int((unguarded & (labels == 0)).sum())}
        for lang in ("all", "en", "zh"):
            mask = np.ones(len(rows), bool) if lang == "all" else langs == lang
            served = (scores >= th) & mask & same
            tp = int((served & (labels == 1)).sum())
            row[lang] = {"precision": round(tp / max(1, int(served.sum())), 3),
                         "recall": round(tp / int(((labels == 1) & mask).sum()), 3),
                         "false_hits": int((served & (labels == 0)).sum())}
        table[str(th)] = row
    t0 = time.perf_counter()
    for r in rows[:100]:
        embedder.embed([comparable(r[2])])
    table["embed_one_turn_ms"] = round((time.perf_counter() - t0) * 10, 3)
    return table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--precision-only", action="store_true")
    ap.add_argument("--hit-path-only", action="store_true")
    args = ap.parse_args()
    if args.precision_only:
        print(json.dumps(precision(UseEmbedder()), indent=2))
        return
    if args.hit_path_only:
        print(json.dumps({"hit_path": asyncio.run(hit_path(500)),
                          "cache_stage": stage_time(500)}, indent=2))
        return
    n = 100 if args.quick else 500
    emb = UseEmbedder()
    t0 = time.perf_counter()
    emb.embed(["warm up"])  # the package reads its weights on the first encode
    load_s = round(time.perf_counter() - t0, 2)
    result = {
        "machine": f"{platform.machine()} {platform.python_version()}",
        "embedder": {"name": emb.name, "load_s": load_s},
        "hit_path": asyncio.run(hit_path(n)),
        "cache_stage": stage_time(n),
        "semantic_lookup_100k": semantic_lookup(100_000, 50 if args.quick else 200),
        "precision": precision(emb),
        "shipped_threshold": SHIPPED_THRESHOLD,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
