"""What relaying a stream costs the gateway: CPU per stream and the state it keeps.

In process, on uvloop: ``pipeline.upstream_call.relay`` over a 64-token and a
3,000-token chat stream (vLLM-shaped chunks, two events per upstream read, usage at
the end), with and without recovering the relayed text afterwards (what the audit
finisher does on every stream by default, and the meter when no usage came). Prints
JSON: microseconds of CPU per stream and the bytes kept for the stream's text.

    python bench/bench_relay_state.py [--streams 200]

To compare with another checkout, run it with that tree first on the path:
``PYTHONPATH=../other/src python bench/bench_relay_state.py``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import uvloop

from tokenplane.operations.chat import CHAT
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.upstream_call import relay, relayed_text
from tokenplane.upstream.types import UpstreamResponse


def chunks(n: int) -> list[bytes]:
    evs = [b"data: " + orjson.dumps({
        "id": "chatcmpl-0123456789abcdef0123456789abcdef", "object": "chat.completion.chunk",
        "created": 1700000000, "model": "meta-llama/Meta-Llama-3-8B-Instruct",
        "choices": [{"index": 0, "delta": {"content": f" w{i % 97}"}, "logprobs": None,
                     "finish_reason": None}]}) + b"\n\n" for i in range(n)]
    usage = b'data: {"id":"x","object":"chat.completion.chunk","choices":[],"usage":' \
        b'{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}\n\n' % (n, n + 5)
    return [b"".join(evs[i:i + 2]) for i in range(0, n, 2)] + [usage, b"data: [DONE]\n\n"]


def kept(relayed: Any) -> int:
    if isinstance(relayed, list):  # before issue 13: every content event
        return sum(len(ev) for ev in relayed)
    return int(relayed.retained_bytes())


async def one(items: list[bytes], text: bool) -> RequestContext:
    async def up() -> AsyncIterator[bytes]:
        for c in items:
            yield c

    ctx = RequestContext("r", "/v1/chat/completions", CHAT, b"", {})
    ctx.stream = True
    async for _ in relay(ctx, UpstreamResponse(200, {}, events=up())):
        pass
    if text:
        relayed_text(ctx)
    return ctx


async def main_async(streams: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in (64, 3000):
        items = chunks(n)
        for text in (False, True):
            count = max(10, streams * 64 // n)
            best = float("inf")
            for _ in range(3):
                t0 = time.process_time()
                for _ in range(count):
                    ctx = await one(items, text)
                best = min(best, (time.process_time() - t0) / count)
            name = f"tokens_{n}" + ("_with_text" if text else "")
            out[name] = {"cpu_us_per_stream": round(best * 1e6, 1),
                         "kept_bytes": kept(ctx.relayed),
                         "relayed_bytes": sum(len(c) for c in items)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, default=200)
    args = ap.parse_args()
    res = uvloop.run(main_async(args.streams))
    print(orjson.dumps({"bench": "relay_state", "results": res},
                       option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
