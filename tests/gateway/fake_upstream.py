"""A tiny OpenAI-compatible upstream for usage edge cases, on a real port in a thread.

The request's ``user`` field picks the usage it reports: ``zero`` (all counts 0),
``none`` (no usage at all), anything else a normal usage block. Faults: ``hang`` never
answers, ``hang-stream`` sends a stream's head and then nothing, ``stall-body`` the
head and half of a non-stream body (``hanging`` counts these requests whose connection
is still open: a client that closes it cancels the handler, as vLLM aborts a request
whose client left); ``flood`` streams ``FLOOD`` one-token events (no usage) as fast as
the reader takes them (``flood_bytes``: what it wrote; ``flooding``: floods still
running). Streams send the words of ``REPLY`` one per chunk.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tests.gateway.harness import free_port

REPLY = "alpha beta gamma delta"
FLOOD = 50_000
FLOOD_EVENT = b"data: " + orjson.dumps({
    "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
    "model": "fake-upstream",
    "choices": [{"index": 0, "delta": {"content": " hello"}, "finish_reason": None}],
}) + b"\n\n"


def _usage(mode: str) -> dict[str, Any] | None:
    if mode == "zero":
        return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
                "prompt_tokens_details": {"cached_tokens": 0}}
    if mode == "none":
        return None
    return {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}


async def _chat(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
    mode = str(body.get("user") or "")
    usage = _usage(mode)
    base = {"id": "chatcmpl-fake", "created": 0, "model": "fake-upstream"}
    if not body.get("stream"):
        out: dict[str, Any] = {**base, "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": REPLY},
             "finish_reason": "stop"}]}
        if usage is not None:
            out["usage"] = usage
        return web.Response(body=orjson.dumps(out), content_type="application/json")
    resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await resp.prepare(request)
    words = REPLY.split(" ")
    for i, w in enumerate(words):
        chunk = {**base, "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"content": w if i == 0 else " " + w},
             "finish_reason": "stop" if i == len(words) - 1 else None}]}
        await resp.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
    if usage is not None:
        last = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        await resp.write(b"data: " + orjson.dumps(last) + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    return resp


class FakeUpstream:
    def __init__(self) -> None:
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.hanging = 0  # "hang" requests whose connection is open (read in any thread)
        self.hung = 0  # "hang" requests received
        self.flood_bytes = 0
        self.flooding = 0
        self._changed = threading.Condition()  # notified whenever a counter moves

    def _moved(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_until(self, cond: Callable[[FakeUpstream], bool], timeout: float,
                   what: str) -> None:
        """Block (another thread) until ``cond(self)`` holds; fail with ``what``."""
        with self._changed:
            if not self._changed.wait_for(lambda: cond(self), timeout):
                raise AssertionError(what)

    async def _flood(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        batch = FLOOD_EVENT * 50
        self.flooding += 1
        self._moved()
        try:
            for _ in range(FLOOD // 50):
                await resp.write(batch)  # waits while the reader takes nothing
                self.flood_bytes += len(batch)
            await resp.write(b"data: [DONE]\n\n")
        finally:
            self.flooding -= 1
            self._moved()
        return resp

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body.get("user") == "flood":
            return await self._flood(request)
        if body.get("user") == "hang-stream":  # the head, then silence
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
        elif body.get("user") == "stall-body":
            resp = web.StreamResponse(headers={"content-type": "application/json"})
            resp.content_length = 100
            await resp.prepare(request)
            await resp.write(b'{"id": "chatcmpl-fake", "choices": [')
        elif body.get("user") != "hang":
            return await _chat(request, body)
        self.hung += 1
        self.hanging += 1
        self._moved()
        try:
            await asyncio.Event().wait()  # cancelled when the connection closes
        finally:
            self.hanging -= 1
            self._moved()
        raise AssertionError("unreachable")

    @property
    def base_url(self) -> str:
        """The server root (the gateway appends the OpenAI path, /v1/...)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeUpstream:
        self._thread.start()

        async def up() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._handle)
            self._runner = web.AppRunner(app, handle_signals=False, handler_cancellation=True)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

        asyncio.run_coroutine_threadsafe(up(), self.loop).result(30)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
