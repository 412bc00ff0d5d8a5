"""What the access log costs a request on the event loop: the finisher's work (build the
record, encode it, queue it), with the writer thread writing to a file behind it.

End-to-end rounds (``bench_gateway.py --access-log``) are too noisy on a shared machine
to show a few microseconds; this times the finisher itself, on the loop, with the real
writer running, and the sampled-out case (``sample: 0``: one random draw).

    python bench/bench_access_log.py [--n 200000] [--out bench/out/access_log.json]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from tokenplane.auth.principal import Principal
from tokenplane.observe.access_log import AccessLog
from tokenplane.operations.chat import CHAT
from tokenplane.pipeline.access_log_stage import AccessLogFinisher
from tokenplane.pipeline.context import RequestContext
from tokenplane.tokens.counts import TokenCounts


def _ctx() -> RequestContext:
    ctx = RequestContext("0123abcd-42", "/v1/chat/completions", CHAT, b"", {})
    ctx.principal = Principal("key_7f3a9c", "acme", "research", "rag-bot")
    ctx.alias, ctx.stream = "llama3-8b", True
    ctx.first_token = ctx.arrival + 0.05
    ctx.final = (0, TokenCounts(system=120, user=40, output=256))
    return ctx


async def _time(fin: AccessLogFinisher, ctx: RequestContext, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        await fin.finish(ctx)
    return (time.perf_counter() - t0) / n * 1e6


async def main_async(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {"bench": "access_log", "n": n}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "access.jsonl"
        for name, sample in (("on", 1.0), ("sampled_out", 0.0)):
            log = AccessLog(str(path), sample)
            log.start()
            fin, ctx = AccessLogFinisher(log), _ctx()
            ctx.status = "ok"
            await _time(fin, ctx, n // 10)  # warm up
            best = min([await _time(fin, ctx, n) for _ in range(3)])
            await log.close()
            out[f"us_per_request_{name}"] = round(best, 3)
        out["bytes_per_line"] = len(path.read_bytes().splitlines()[0]) + 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    res = asyncio.run(main_async(args.n))
    text = orjson.dumps(res, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
