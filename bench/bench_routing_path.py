"""CPU cost per request of routing and scheduling on the gateway's request path.

In-process, no network: builds a real gateway (one and three replicas of one alias) and
times, per request, (a) the old baseline ``pick_least_loaded`` (fewest in flight,
round-robin), (b) routing with the default profile and the scheduler off, (c) the
schedule stage (class, submit, release, late binding) plus routing and the
routing finisher, each on a chat request of a few messages. Prints JSON.

    python bench/bench_routing_path.py [--n 20000] [--messages 6]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from tokenplane.app import build_gateway
from tokenplane.auth.principal import Principal
from tokenplane.compose.config_file import validate_config
from tokenplane.operations.chat import CHAT
from tokenplane.pipeline.context import RequestContext
from tokenplane.tokens.counts import TokenCounts
from tokenplane.upstream.pool import pick_least_loaded


def _config(home: Path, scheduling: bool, replicas: int = 3) -> dict[str, Any]:
    return {
        "data_dir": str(home),
        "models": [{"alias": "m", "tokenizer": "cl100k_base", "backends": [
            {"id": f"r{i}", "type": "vllm", "base_url": f"http://127.0.0.1:{9 + i}"}
            for i in range(replicas)]}],
        "routing": {"scrape_interval_s": 0},
        "scheduling": {"enabled": scheduling},
        "governance": {"enabled": False},
    }


def _ctx(i: int, messages: int) -> RequestContext:
    body = {"model": "m", "max_tokens": 64, "messages": [
        {"role": "system", "content": "You are a helpful assistant. " * 20}] + [
        {"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k} " * 40}
        for k in range(messages - 1)]}
    ctx = RequestContext(f"req-{i}", "/v1/chat/completions", CHAT, orjson.dumps(body), {},
                         body=body, principal=Principal("k", "bench", app="bench"))
    ctx.counts = TokenCounts(system=120, history=60 * max(0, messages - 2), user=60)
    ctx.max_tokens = 64
    return ctx


async def _time(n: int, messages: int, step: Callable[[RequestContext], Awaitable[None]]) -> float:
    ctxs = [_ctx(i, messages) for i in range(n)]
    t0 = time.perf_counter()
    for ctx in ctxs:
        await step(ctx)
    return (time.perf_counter() - t0) / n * 1e6


async def main_async(n: int, messages: int) -> dict[str, Any]:
    out: dict[str, Any] = {"bench": "routing_path", "n": n, "messages": messages}
    for replicas in (1, 3):
        out[f"replicas_{replicas}"] = await _one_size(n, messages, replicas)
    return out


async def _one_size(n: int, messages: int, replicas: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        off = build_gateway(validate_config(_config(Path(tmp) / "off", False, replicas)))
        on = build_gateway(validate_config(_config(Path(tmp) / "on", True, replicas)))
        pool = off.pools["m"]
        r_off, r_on = off.routing, on.routing
        assert r_off is not None and r_on is not None
        assert r_on.schedule_stage is not None

        async def legacy(ctx: RequestContext) -> None:
            ctx.endpoint = pick_least_loaded(pool, exclude=())

        async def routed(ctx: RequestContext) -> None:
            ctx.alias, ctx.pool, ctx.model = "m", off.pools["m"], off.pools["m"].model
            await r_off.route_stage.run(ctx)
            await r_off.finisher.finish(ctx)

        async def scheduled(ctx: RequestContext) -> None:
            ctx.alias, ctx.pool, ctx.model = "m", on.pools["m"], on.pools["m"].model
            assert r_on.schedule_stage is not None
            await r_on.schedule_stage.run(ctx)
            await r_on.route_stage.run(ctx)
            await r_on.finisher.finish(ctx)
            assert ctx.route is not None and ctx.route.queue is not None

        for name, step in (("baseline_pick_least_loaded", legacy),
                           ("routing_profile", routed), ("scheduler_and_routing", scheduled)):
            await _time(min(n, 2000), messages, step)  # warm up
            out[f"{name}_us"] = round(await _time(n, messages, step), 2)
        out["added_us_per_request"] = round(
            out["scheduler_and_routing_us"] - out["baseline_pick_least_loaded_us"], 2)
        for gw in (off, on):
            await gw.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--messages", type=int, default=6)
    args = ap.parse_args()
    print(orjson.dumps(asyncio.run(main_async(args.n, args.messages)),
                       option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
