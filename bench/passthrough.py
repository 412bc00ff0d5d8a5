"""The baseline: a minimal pass-through proxy (aiohttp server + uvloop, pooled client).

It forwards the body as it is and relays the upstream's bytes; no auth, no parsing,
no metering. ``python bench/passthrough.py PORT UPSTREAM_URL [aiohttp|h1] [reuse]``: the
client is aiohttp's ``ClientSession`` (what a Python proxy is usually written with;
the issue's baseline) or the gateway's own HTTP/1.1 client (``tokenplane.upstream.http1_client``,
to show what the gateway costs over the same transport). ``reuse`` binds with
SO_REUSEPORT, so several processes can share the port.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import aiohttp
import uvloop
from aiohttp import web

from tokenplane.upstream.http1_client import H1Pool

Proxy = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _aiohttp_proxy(upstream: str, app: web.Application) -> Proxy:
    session_key: web.AppKey[aiohttp.ClientSession] = web.AppKey("session")

    async def on_startup(a: web.Application) -> None:
        a[session_key] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def on_cleanup(a: web.Application) -> None:
        await a[session_key].close()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)

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

    return proxy


def _h1_proxy(upstream: str) -> Proxy:
    pool = H1Pool(upstream)
    json_headers = {"content-type": "application/json"}

    async def proxy(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        conn = await pool.request("POST", request.path, json_headers, body)
        try:
            status, headers = await conn.head()
            ctype = headers.get("content-type", "")
            if not ctype.startswith("text/event-stream"):
                data = await conn.read_all()
                pool.release(conn)
                return web.Response(status=status, body=data, headers={"content-type": ctype})
            resp = web.StreamResponse(status=status,
                                      headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            while data := await conn.read_some():
                await resp.write(data)
            pool.release(conn)
            return resp
        except BaseException:
            conn.close()
            raise

    return proxy


def build(upstream: str, client: str = "aiohttp") -> web.Application:
    app = web.Application()
    proxy = _h1_proxy(upstream) if client == "h1" else _aiohttp_proxy(upstream, app)
    app.router.add_post("/v1/chat/completions", proxy)
    return app


if __name__ == "__main__":
    web.run_app(build(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "aiohttp"),
                host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None,
                reuse_port="reuse" in sys.argv[4:], loop=uvloop.new_event_loop())
