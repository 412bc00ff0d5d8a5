"""A real HTTP test upstream that records request bodies and echoes the last user
message back as its completion (streamed in random small chunks, seeded by the
request's ``seed``), so placeholders the gateway put in come back and must be
restored. A last user message ``CALL:<tool>:<text>`` makes it call ``<tool>`` with
``{"q": "<text>"}`` instead."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any

import orjson
from aiohttp import web

from tests.gateway.harness import free_port


def _last_user(body: dict[str, Any]) -> str:
    if "prompt" in body:
        p = body["prompt"]
        return p if isinstance(p, str) else " ".join(str(x) for x in p)
    for m in reversed(body.get("messages", [])):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return ""


def _pieces(text: str, rng: random.Random) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(text):
        n = rng.randint(1, 5)
        out.append(text[i : i + n])
        i += n
    return out


class EchoUpstream:
    def __init__(self) -> None:
        self.port = free_port()
        self.bodies: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> EchoUpstream:
        self._thread.start()

        async def up() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self.chat)
            app.router.add_post("/v1/completions", self.chat)
            self._runner = web.AppRunner(app, handle_signals=False)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

        asyncio.run_coroutine_threadsafe(up(), self.loop).result(10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def raw_bodies(self) -> bytes:
        return b"\n".join(orjson.dumps(b) for b in self.bodies)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        self.bodies.append(body)
        chat = request.path.endswith("/chat/completions")
        text = _last_user(body)
        call: tuple[str, str] | None = None
        if chat and text.startswith("CALL:"):
            name, _, rest = text[5:].partition(":")
            call = (name, orjson.dumps({"q": rest}).decode())
        usage = {"prompt_tokens": 10, "completion_tokens": max(1, len(text) // 4),
                 "total_tokens": 10 + max(1, len(text) // 4)}
        base = {"id": "cmpl-echo", "created": int(time.time()), "model": body.get("model")}
        if not body.get("stream"):
            if not chat:
                choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": "stop"}
            elif call is not None:
                choice = {"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": None, "tool_calls": [{
                        "id": "call_1", "type": "function",
                        "function": {"name": call[0], "arguments": call[1]}}]}}
            else:
                choice = {"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": text}}
            obj = {**base, "object": "chat.completion" if chat else "text_completion",
                   "choices": [choice], "usage": usage}
            return web.Response(body=orjson.dumps(obj), content_type="application/json")
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        rng = random.Random(body.get("seed", 0))
        obj_name = "chat.completion.chunk" if chat else "text_completion"

        async def send(choices: list[dict[str, Any]], **extra: Any) -> None:
            ev = {**base, "object": obj_name, "choices": choices, **extra}
            await resp.write(b"data: " + orjson.dumps(ev) + b"\n\n")

        if chat:
            await send([{"index": 0, "delta": {"role": "assistant", "content": ""},
                         "finish_reason": None}])
        if call is not None:
            await send([{"index": 0, "delta": {"tool_calls": [{
                "index": 0, "id": "call_1", "type": "function",
                "function": {"name": call[0], "arguments": ""}}]}, "finish_reason": None}])
            for piece in _pieces(call[1], rng):
                await send([{"index": 0, "delta": {"tool_calls": [{
                    "index": 0, "function": {"arguments": piece}}]}, "finish_reason": None}])
            await send([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])
        else:
            for piece in _pieces(text, rng):
                if chat:
                    await send([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
                else:
                    await send([{"index": 0, "text": piece, "finish_reason": None}])
            await send([{"index": 0, "delta": {}, "finish_reason": "stop"}] if chat
                       else [{"index": 0, "text": "", "finish_reason": "stop"}])
        await send([], usage=usage)
        await resp.write(b"data: [DONE]\n\n")
        return resp


def echo_config(upstream: EchoUpstream, governance: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "models": [{
            "alias": "echo", "tokenizer": "cl100k_base", "context_window": 8192,
            "backends": [{"id": "echo", "type": "openai", "base_url": upstream.base_url}],
        }],
        "tenants": [{"name": "default"}, {"name": "acme"}, {"name": "globex"}],
    }
    if governance is not None:
        cfg["governance"] = governance
    return cfg
