"""The HTTP/1.1 front's way to every route it does not serve itself.

Such a request (models, metrics, health, admin, unknown paths) goes, as received, to
the full aiohttp application over the gateway's own HTTP/1.1 client
(``upstream/http1_client.py``); the answer's status, headers and body come back (the
body streamed when it comes in pieces). These routes are rare, so this path is kept
simple rather than fast. HEAD is asked as GET and answered with the head only.

The application listens on no port: each relay connection is one end of a Unix
socket pair whose other end is handed to aiohttp's server as an accepted
connection. Nothing but the front reaches it, so a slow or greedy client meets the
front's deadlines and caps whatever the route.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

from aiohttp import web

from tokenplane.api.front.protocol import FrontConnection
from tokenplane.api.front.wire import FrontRequest
from tokenplane.api.openai_routes import error_headers
from tokenplane.errors import GatewayError, error_body
from tokenplane.upstream.http1_client import H1Connection, H1Error, H1Pool

# hop-by-hop, or set by the client (host, framing) on each leg
_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
                  "trailer", "upgrade", "host", "content-length", "expect"})

# the client's Host header, which the relay replaces on its own leg
HOST_HEADER = "x-tokenplane-host"


class Relay:
    def __init__(self, app_server: web.Server, new_id: Callable[[], str]) -> None:
        self.app_server = app_server
        self.pool = H1Pool("http://gateway", open_socket=self._pair)
        self.new_id = new_id

    async def _pair(self) -> socket.socket:
        """A new connection to the application: one end for it, one for the client."""
        ours, theirs = socket.socketpair()
        try:
            await asyncio.get_running_loop().connect_accepted_socket(self.app_server, theirs)
        except BaseException:
            ours.close()
            theirs.close()
            raise
        return ours

    async def forward(self, conn: FrontConnection, req: FrontRequest) -> None:
        headers: dict[str, str] = {}
        for name, value in req.headers.items():
            key = name.lower()
            if key not in _HOP:
                headers[key] = f"{headers[key]}, {value}" if key in headers else value
        headers.pop(HOST_HEADER, None)
        host = next((v for n, v in req.headers.items() if n.lower() == "host"), None)
        if host is not None:  # the host the client asked (the console's origin check)
            headers[HOST_HEADER] = host
        head_only = req.method == "HEAD"
        up: H1Connection | None = None
        streaming = done = False
        try:
            up = await self.pool.request("GET" if head_only else req.method, req.target,
                                         headers, req.body)
            status, got = await up.head()
            out = {k: v for k, v in got.items() if k not in _HOP}
            if head_only or "content-length" in got or status in (204, 304):
                conn.respond(req, status, out, await up.read_all(), head_only=head_only)
            else:
                streaming = True
                conn.start_stream(req, status, out)
                while data := await up.read_some():
                    conn.write_chunk(data)
                    await conn.drain()
                conn.end_stream()
            done = True
        except H1Error as exc:
            if streaming:  # the head went out: end the connection under the broken body
                req.keep_alive = False
            else:
                err = GatewayError(502, f"The gateway could not reach its own routes: {exc}",
                                   code="relay_failed")
                conn.respond(req, err.status, error_headers(err, self.new_id()), error_body(err))
        except ConnectionError:  # the client went away
            pass
        finally:
            if up is not None and done:
                self.pool.release(up)  # reused only after a whole exchange
            elif up is not None:
                up.close()

    def close(self) -> None:
        self.pool.close()
