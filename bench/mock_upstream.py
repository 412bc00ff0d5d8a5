"""A minimal, fast OpenAI-compatible upstream for the overhead benchmark.

Answers chat completions at once: a fixed answer with usage, or a stream of N
one-token chunks plus the usage chunk. ``python bench/mock_upstream.py PORT``.
"""

from __future__ import annotations

import sys

import orjson
import uvloop
from aiohttp import web

ANSWER = orjson.dumps({
    "id": "chatcmpl-mock", "object": "chat.completion", "created": 0, "model": "mock",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": " word" * 64},
                 "finish_reason": "length"}],
    "usage": {"prompt_tokens": 20, "completion_tokens": 64, "total_tokens": 84},
})


def chunk(content: str | None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    return b"data: " + orjson.dumps({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }) + b"\n\n"


def build(tokens: int = 64) -> web.Application:
    body = [chunk(" word") for _ in range(tokens - 1)] + [chunk(" word", "length")]
    usage = b"data: " + orjson.dumps({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock",
        "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": tokens,
                                 "total_tokens": 20 + tokens}}) + b"\n\n"

    async def chat(request: web.Request) -> web.StreamResponse:
        req = orjson.loads(await request.read())
        if not req.get("stream"):
            return web.Response(body=ANSWER, content_type="application/json")
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        for c in body:
            await resp.write(c)
        so = req.get("stream_options") or {}
        if so.get("include_usage"):
            await resp.write(usage)
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application(client_max_size=64 << 20)  # huge prompts (bench_big_prompts)
    app.router.add_post("/v1/chat/completions", chat)
    return app


if __name__ == "__main__":
    web.run_app(build(), host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None,
                loop=uvloop.new_event_loop())
