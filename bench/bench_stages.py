"""CPU per pipeline stage for a typical chat request, in process (no HTTP).

Builds the gateway from a config like bench_gateway's (the default governance, and
governance off), runs every stage before the upstream call on a short two-message chat
(a repeated system prompt, a different user turn each time), then the finishers on a
completed answer. Prints JSON: microseconds per call for each stage / finisher, median
over rounds. Each time is the wall clock of the coroutine's own steps: while it waits
(the meter, for the journal's fsync) nothing is counted.

    python bench/bench_stages.py [--requests 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import types
from collections import defaultdict
from collections.abc import Coroutine, Generator
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench_gateway import run_and_print
from tokenplane.app import build_gateway
from tokenplane.config.schema import GatewayConfig
from tokenplane.meta.keystore import KeyStore
from tokenplane.operations.chat import CHAT
from tokenplane.pipeline.context import RequestContext

CONFIG = """
models:
  - alias: m
    tokenizer: cl100k_base
    context_window: 8192
    prices: {input: "0.10", output: "0.40"}
    backends:
      - {id: sim, type: sim, replicas: 2}
tenants: [{name: bench}]
"""
ANSWER = {"id": "x", "object": "chat.completion", "model": "mock",
          "choices": [{"index": 0, "finish_reason": "stop",
                       "message": {"role": "assistant", "content": "Hello!"}}],
          "usage": {"prompt_tokens": 30, "completion_tokens": 3, "total_tokens": 33}}


@types.coroutine
def own_time(coro: Coroutine[Any, Any, None], acc: dict[str, int],
             key: str) -> Generator[Any, Any, None]:
    """Runs ``coro``, adding the time of its own steps (not its waits) to ``acc[key]``."""
    sent: Any = None
    while True:
        t = time.perf_counter_ns()
        try:
            out = coro.send(sent)
        except StopIteration:
            acc[key] += time.perf_counter_ns() - t
            return
        acc[key] += time.perf_counter_ns() - t
        sent = yield out


def body(n: int) -> bytes:
    return orjson.dumps({"model": "m", "max_tokens": 64, "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": f"Say hello in one word please. ({n})"}]})


async def one_variant(home: Path, governance: bool, requests: int,
                      rounds: int) -> dict[str, float]:
    raw: dict[str, Any] = yaml.safe_load(CONFIG)
    raw["data_dir"] = str(home)
    if not governance:
        raw["governance"] = {"enabled": False}
    store = KeyStore(home / "meta.db")
    key, _ = store.create_key("bench", app="bench")
    store.close()
    gw = build_gateway(GatewayConfig.model_validate(raw))
    await gw.start()
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    p = gw.pipeline
    per: dict[str, list[float]] = defaultdict(list)
    n = 0
    try:
        for _ in range(rounds):
            acc: dict[str, int] = defaultdict(int)
            for _ in range(requests):
                n += 1
                ctx = RequestContext(f"r{n}", "/v1/chat/completions", CHAT, body(n), headers)
                for stage in p.stages:
                    await own_time(stage.run(ctx), acc, type(stage).__name__)
                now = time.time()
                ctx.upstream_start = ctx.first_token = ctx.last_token = now
                ctx.usage = ANSWER["usage"]  # type: ignore[assignment]
                ctx.response_model = "mock"
                if ctx.endpoint is not None:
                    ctx.endpoint.in_flight -= 1
                for fin in p.finishers:
                    await own_time(fin.finish(ctx), acc, "finish:" + type(fin).__name__)
            for k, v in acc.items():
                per[k].append(v / requests / 1e3)
    finally:
        await gw.close()
    out = {k: round(statistics.median(v), 2) for k, v in per.items()}
    out["total"] = round(sum(out.values()), 2)
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {}
    for name, gov in (("gateway-lean", False), ("gateway", True)):
        with tempfile.TemporaryDirectory() as tmp:
            res[name] = await one_variant(Path(tmp), gov, args.requests, args.rounds)
    return {"bench": "pipeline_stages", "unit": "us per request", "results": res}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    run_and_print(main_async, ap.parse_args())


if __name__ == "__main__":
    main()
