"""Admission as the gateway runs it: the stage (reserve) plus the finisher (reconcile)
per request, with the in-process store and with Redis.

Prints JSON. Baseline in the same run: the same request context through an empty
stage and finisher (what the pipeline cost before admission), and for Redis a bare
``PING`` round trip. A chain of five scopes (tenant, department, app, key, user) and
the model alias; eight limits.

    python bench/bench_admission_gateway.py [--redis redis://127.0.0.1:6379/0] [--n 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio as aioredis

from tokenplane.admission import MemoryStore, RedisStore
from tokenplane.admission.gateway.budget_alerts import BudgetAlerts
from tokenplane.admission.gateway.service import AdmissionService
from tokenplane.admission.stores.base import CounterStore
from tokenplane.auth.principal import Principal
from tokenplane.config.schema import AdmissionConfig, ModelConfig
from tokenplane.meta.limit_store import LimitStore, LimitTarget
from tokenplane.metering.pricing import PriceBook
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.operations.chat import CHAT
from tokenplane.pipeline.admission_stage import AdmissionFinisher, AdmissionStage
from tokenplane.pipeline.context import RequestContext
from tokenplane.tokens.counts import TokenCounts

BIG = 10**12
PRICES = PriceBook({"currency": "USD", "models": {"m": {"input": "0.10", "output": "0.40"}}})
PRINCIPAL = Principal("key_bench", "acme", "eng", "bot", end_user="u1")


def _limits(path: Path) -> LimitStore:
    store = LimitStore(path / "meta.db")
    store.set(LimitTarget("acme"), {"tpm": BIG, "budget_micros": BIG})
    store.set(LimitTarget("acme", department="eng"), {"tokens_per_day": BIG})
    store.set(LimitTarget("acme", department="eng", app="bot"),
              {"rpm": BIG, "max_concurrent": 10**6})
    store.set(LimitTarget("acme", key_id="key_bench"), {"rpm": BIG})
    store.set(LimitTarget("acme", user="u1", model="m"), {"max_tokens_in_flight": BIG})
    return store


def _ctx(i: int) -> RequestContext:
    ctx = RequestContext(f"req{i}-{uuid.uuid4().hex[:6]}", "/v1/chat/completions", CHAT,
                         b"", {})
    ctx.principal, ctx.alias, ctx.max_tokens = PRINCIPAL, "m", 200
    ctx.counts = TokenCounts(user=300)
    ctx.upstream_start = time.time()
    ctx.usage = {"prompt_tokens": 300, "completion_tokens": 120}
    return ctx


def _count(model: ModelConfig, text: str) -> int:
    return len(text.split())


def _summary(ns: list[int]) -> dict[str, float]:
    s = sorted(ns)
    return {"p50_us": round(s[len(s) // 2] / 1000, 2),
            "p99_us": round(s[int(len(s) * 0.99)] / 1000, 2),
            "mean_us": round(statistics.fmean(s) / 1000, 2)}


async def _run(svc: AdmissionService | None, n: int) -> dict[str, float]:
    stage = AdmissionStage(svc) if svc is not None else None
    fin = AdmissionFinisher(svc, _count) if svc is not None else None
    samples: list[int] = []
    for i in range(n + n // 10):
        ctx = _ctx(i)
        t0 = time.perf_counter_ns()
        if stage is not None and fin is not None:
            await stage.run(ctx)
            await fin.finish(ctx)
        else:
            await asyncio.sleep(0)
        if i >= n // 10:  # warm-up excluded
            samples.append(time.perf_counter_ns() - t0)
    return _summary(samples)


def _service(store: CounterStore, limits: LimitStore) -> AdmissionService:
    metrics = GatewayMetrics()
    cfg = AdmissionConfig(predict_output=True)  # type: ignore[call-arg]
    return AdmissionService(cfg, limits, store, metrics, lambda: PRICES, BudgetAlerts(metrics))


async def main(redis_url: str | None, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {"n": n, "scopes": 10, "limits": 8}
    with tempfile.TemporaryDirectory() as tmp:
        limits = _limits(Path(tmp))
        out["baseline_empty"] = await _run(None, n)
        out["memory_store"] = await _run(_service(MemoryStore(), limits), n)
        if redis_url:
            prefix = f"tp:bench:{uuid.uuid4().hex[:8]}:"
            store = RedisStore.from_url(redis_url, prefix=prefix)
            client = aioredis.Redis.from_url(redis_url)
            pings: list[int] = []
            for _ in range(n):
                t0 = time.perf_counter_ns()
                await client.ping()
                pings.append(time.perf_counter_ns() - t0)
            out["redis_ping_baseline"] = _summary(pings)
            out["redis_store"] = await _run(_service(store, limits), n)
            async for key in client.scan_iter(match=prefix + "*"):
                await client.delete(key)
            await client.aclose()
            await store.close()
        limits.close()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--n", type=int, default=5000)
    args = ap.parse_args()
    print(orjson.dumps(asyncio.run(main(args.redis or None, args.n)),
                       option=orjson.OPT_INDENT_2).decode())
