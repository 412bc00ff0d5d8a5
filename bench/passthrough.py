"""The baseline: a minimal pass-through proxy (aiohttp + uvloop, pooled client).

It forwards the body as it is and relays the upstream's bytes; no auth, no parsing,
no metering. ``python bench/passthrough.py PORT UPSTREAM_URL``.
"""

from __future__ import annotations

import sys

import aiohttp
import uvloop
from aiohttp import web


def build(upstream: str) -> web.Application:
    app = web.Application()
    session_key: web.AppKey[aiohttp.ClientSession] = web.AppKey("session")

    async def on_startup(a: web.Application) -> None:
        a[session_key] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def on_cleanup(a: web.Application) -> None:
        await a[session_key].close()

    async def proxy(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        async with request.app[session_key].post(
            upstream + request.path, data=body, headers={"content-type": "application/json"}
        ) as up:
            if up.content_type != "text/event-stream":
                return web.Response(status=up.status, body=await up.read(),
                                    content_type=up.content_type)
            resp = web.StreamResponse(status=up.status,
                                      headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            async for data in up.content.iter_any():
                await resp.write(data)
            return resp

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    app.router.add_post("/v1/chat/completions", proxy)
    return app


if __name__ == "__main__":
    web.run_app(build(sys.argv[2]), host="127.0.0.1", port=int(sys.argv[1]), print=None,
                access_log=None, loop=uvloop.new_event_loop())
