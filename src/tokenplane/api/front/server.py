"""The gateway's public HTTP/1.1 server: a small front for the inference routes, the
aiohttp application behind it for everything else.

aiohttp's server layer costs several times the CPU per request of a bare ``httptools``
protocol, and the gateway's single event-loop thread is what bounds its throughput. So
``POST /v1/chat/completions``, ``/v1/completions`` and ``/v1/embeddings`` are parsed
and answered by :class:`~tokenplane.api.front.protocol.FrontConnection`, through the
same :meth:`OpenAIRoutes.run` as the aiohttp handler (same pipeline, request ids,
envelopes and headers). Every other request is relayed to the full aiohttp application
(which still serves every route) on a loopback port (``api/front/relay.py``).

:class:`GatewayServer` starts and stops the two; ``tokenplane serve`` and the test
harness both run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import web

from tokenplane.api.front.protocol import HEAD_MAX, FrontConnection
from tokenplane.api.front.relay import Relay
from tokenplane.api.front.wire import FrontRequest
from tokenplane.api.front.writer import ClientStalled
from tokenplane.api.openai_routes import (
    OPENAI_ROUTES,
    OpenAIRoutes,
    error_headers,
    internal_error,
    not_allowed,
    reply_headers,
    stream_headers,
)
from tokenplane.errors import GatewayError, error_body

log = logging.getLogger("tokenplane.api")


class Front:
    """What the front's connections share: the routes, the relay, the open
    connections (for a graceful stop; a connection whose client left stays until
    its request ends, so that a stop waits for the request to be billed)."""

    def __init__(self, routes: OpenAIRoutes, relay: Relay, keepalive_s: float) -> None:
        self.routes = routes
        self.new_id = routes.new_id
        self.max_body = routes.max_body
        self.keepalive_s = keepalive_s
        self.relay = relay
        self.inference_paths = routes.operations.by_path  # the endpoint kinds' paths
        self.stall_s = routes.stream_stall_s  # a stream whose client reads nothing ends
        self.closing = False
        self.connections: set[FrontConnection] = set()
        self._all_closed: asyncio.Event | None = None

    def opened(self, conn: FrontConnection) -> None:
        self.connections.add(conn)

    def closed(self, conn: FrontConnection) -> None:
        self.connections.discard(conn)
        if not self.connections and self._all_closed is not None:
            self._all_closed.set()

    async def serve(self, conn: FrontConnection, req: FrontRequest) -> None:
        if req.error is not None:
            self._error(conn, req, req.error, self.new_id())
        elif req.path in self.inference_paths:
            if req.method == "POST":
                await self._inference(conn, req)
            else:
                self._error(conn, req, not_allowed(req.method, req.path), self.new_id())
        else:
            await self.relay.forward(conn, req)

    @staticmethod
    def _error(conn: FrontConnection, req: FrontRequest, err: GatewayError, rid: str) -> None:
        conn.respond(req, err.status, error_headers(err, rid), error_body(err))

    async def _inference(self, conn: FrontConnection, req: FrontRequest) -> None:
        rid = self.new_id()
        try:
            reply = await self.routes.run(rid, req.path, req.body, req.headers, conn)
        except GatewayError as err:
            self._error(conn, req, err, rid)
            return
        except Exception:
            log.exception("internal error on %s %s (%s)", req.method, req.path, rid)
            self._error(conn, req, internal_error(), rid)
            return
        if reply.stream is None:
            conn.respond(req, reply.status, reply_headers(reply, rid), reply.body or b"")
            return
        stream = reply.stream
        started = False
        try:
            conn.start_stream(req, reply.status, stream_headers(reply, rid))
            started = True  # iterated from here: the stream's own finally cleans up
            async for event in stream:
                conn.write_chunk(event)
                if conn.write_paused:
                    await conn.drain(self.stall_s)
            conn.end_stream()
        except ClientStalled:  # the stream is closed below (cancelling the upstream)
            req.keep_alive = False
            if conn.transport is not None:
                conn.transport.abort()  # what it holds would never be read
        except ConnectionError:
            pass  # the client went away: closing the stream cancels the upstream
        except Exception:  # the head went out: end the connection under the broken body
            log.exception("internal error mid-stream on %s (%s)", req.path, rid)
            req.keep_alive = False
        finally:
            if not started and reply.abandon is not None:
                await reply.abandon()
            await stream.aclose()  # type: ignore[attr-defined]

    async def shutdown(self, timeout: float) -> None:
        """Idle connections close now, busy ones after their answer; after ``timeout``
        the rest are dropped and their requests cancelled."""
        self.closing = True
        for conn in list(self.connections):
            conn.shutdown()
        if self.connections:
            self._all_closed = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_closed.wait(), timeout)
        tasks = [t for conn in list(self.connections) if (t := conn.abort()) is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        self.relay.close()


class GatewayServer:
    """``app`` (from ``build_app``) on 127.0.0.1:<any port>, the front on host:port.

    ``start`` runs the application's start-up hooks; ``stop`` stops accepting, lets
    requests in flight finish (up to ``shutdown_timeout``), then runs its clean-up.
    """

    def __init__(self, app: web.Application, host: str = "127.0.0.1", port: int = 0, *,
                 reuse_port: bool = False, shutdown_timeout: float = 30.0,
                 keepalive_s: float = 75.0) -> None:
        self.app = app
        self.host = host
        self._port = port
        self.reuse_port = reuse_port
        self.shutdown_timeout = shutdown_timeout
        self.keepalive_s = keepalive_s
        self.front: Front | None = None
        self.internal_port = 0
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        return self._port

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        # the front already refused a head over HEAD_MAX (431, in the envelope): what it
        # relays must not meet aiohttp's smaller limits (8,190 bytes a line, 100 fields),
        # whose plain-text 400 has no envelope and no x-request-id
        self._runner = web.AppRunner(self.app, handle_signals=False, access_log=None,
                                     shutdown_timeout=self.shutdown_timeout,
                                     max_line_size=HEAD_MAX, max_field_size=HEAD_MAX,
                                     max_headers=HEAD_MAX // 4)
        await self._runner.setup()  # on_startup
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.internal_port = int(self._runner.addresses[0][1])
        routes = self.app[OPENAI_ROUTES]
        relay = Relay(f"http://127.0.0.1:{self.internal_port}", routes.new_id)
        front = self.front = Front(routes, relay, self.keepalive_s)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: FrontConnection(front), self.host, self._port,
            reuse_port=self.reuse_port or None, backlog=128)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()  # no new connections
        if self.front is not None:
            await self.front.shutdown(self.shutdown_timeout)
            self.front = None
        self._server = None
        if self._runner is not None:
            await self._runner.cleanup()  # on_shutdown, on_cleanup
            self._runner = None
