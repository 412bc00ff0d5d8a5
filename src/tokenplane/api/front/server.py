"""The gateway's public HTTP/1.1 server: a small front for the inference routes, the
aiohttp application behind it for everything else.

aiohttp's server layer costs several times the CPU per request of a bare ``httptools``
protocol, and the gateway's single event-loop thread is what bounds its throughput. So
``POST /v1/chat/completions``, ``/v1/completions`` and ``/v1/embeddings`` are parsed
and answered by :class:`~tokenplane.api.front.protocol.FrontConnection`, through the
same :meth:`OpenAIRoutes.run` as the aiohttp handler (same pipeline, request ids,
envelopes and headers). Every other request is relayed to the full aiohttp application
(which still serves every route) over a socket pair in this process
(``api/front/relay.py``): it listens on no port, so the front's deadlines and
connection caps cannot be walked around.

:class:`GatewayServer` starts and stops the two; ``tokenplane serve`` and the test
harness both run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiohttp import web

from tokenplane.api.cors import CORS, Cors, is_preflight
from tokenplane.api.front.limits import FRONT_LIMITS, FrontLimits
from tokenplane.api.front.protocol import HEAD_MAX, FrontConnection
from tokenplane.api.front.relay import Relay
from tokenplane.api.front.screen import FRONT_SCREEN, Screen
from tokenplane.api.front.wire import FrontRequest
from tokenplane.api.front.writer import ClientStalled
from tokenplane.api.openai_routes import (
    OPENAI_ROUTES,
    OpenAIRoutes,
    error_parts,
    internal_error,
    not_allowed,
    reply_headers,
    stream_headers,
)
from tokenplane.errors import GatewayError

log = logging.getLogger("tokenplane.api")

_REFUSING_MAX = 64  # 503s to over-cap connections under way at once; more are dropped
SLOW_S = 1.0  # a connection without a whole request after this long may be shed
_WARN_EVERY_S = 10.0


class Front:
    """What the front's connections share: the routes, the relay, the deadlines,
    the open connections (for a graceful stop; a connection whose client left stays
    until its request ends, so that a stop waits for the request to be billed) and
    the count of them per client address (the caps)."""

    def __init__(self, routes: OpenAIRoutes, relay: Relay,
                 limits: FrontLimits | None = None, screen: Screen | None = None,
                 cors: Cors | None = None) -> None:
        limits = limits or FrontLimits()
        self._screen = screen
        self.routes = routes
        self.cors = cors  # server.cors (None: off, the one check a request pays)
        self.new_id = routes.new_id
        self.max_body = routes.max_body
        self.keepalive_s = limits.keepalive_s
        self.header_timeout_s = limits.header_timeout_s
        self.body_timeout_s = limits.body_timeout_s
        self.body_min_rate = limits.body_min_rate
        self.max_connections = limits.connection_cap()
        self.max_per_address = limits.max_connections_per_address
        self.relay = relay
        self.inference_paths = routes.operations.by_path  # the endpoint kinds' paths
        self.dialect_for = routes.operations.dialect_for
        self.stall_s = routes.stream_stall_s  # a stream whose client reads nothing ends
        self.closing = False
        self.slow_s = SLOW_S  # how long without a whole request makes a connection slow
        self.connections: set[FrontConnection] = set()
        # admitted connections that have not yet sent a whole request, oldest first
        # (their open time): when the pool runs low, the oldest slow ones are shed
        self.unproven: dict[FrontConnection, float] = {}
        self.reserve = max(1, self.max_connections // 20)
        self.shed = 0  # slow connections shed since the start
        self.admitted = 0  # connections counted against the caps
        self.by_address: dict[str, int] = {}
        self.refusing = 0  # connections over a cap, being answered 503
        self.refused = 0  # connections refused since the start
        self._warn_after = 0.0
        self._all_closed: asyncio.Event | None = None

    def screen(self, req: FrontRequest) -> GatewayError | None:
        return self._screen(req.path, req.headers) if self._screen is not None else None

    def opened(self, conn: FrontConnection) -> GatewayError | None:
        """Takes a new connection, or refuses it: over ``max_connections`` or over
        ``max_per_address`` from its address, a 503 with ``retry-after`` (while
        fewer than ``_REFUSING_MAX`` such answers are under way; beyond, it is
        dropped unread)."""
        self.connections.add(conn)
        assert conn.transport is not None
        peer = conn.transport.get_extra_info("peername")
        addr = conn.peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        held = self.by_address.get(addr, 0)
        cap = self.max_per_address
        if (not cap or held < cap) and (self.admitted < self.max_connections - self.reserve
                                         or self._shed_slow()
                                         or self.admitted < self.max_connections):
            conn.admitted = True
            self.admitted += 1
            self.by_address[addr] = held + 1
            self.unproven[conn] = time.monotonic()
            return None
        if self.refusing >= _REFUSING_MAX:
            self.connections.discard(conn)  # not tracked: nothing to count down
            conn.transport.abort()
            return None
        self.refusing += 1
        self.refused += 1
        full = self.admitted >= self.max_connections
        now = time.monotonic()
        if now >= self._warn_after:  # at most one line per _WARN_EVERY_S under a flood
            self._warn_after = now + _WARN_EVERY_S
            log.warning("front: refusing connections (%d so far): %s", self.refused,
                        f"{self.admitted} open, the most this worker takes" if full else
                        f"{held} open from {addr}, the most one address may hold")
        what = ("The gateway holds as many connections as it takes" if full
                else "Too many connections from your address are open")
        return GatewayError(503, f"{what}; close some, or retry later.",
                            code="too_many_connections", headers={"retry-after": "1"})

    def _shed_slow(self) -> bool:
        """The pool runs low (its last ``reserve`` slots): drops the oldest admitted
        connection that has not sent a whole request in ``SLOW_S`` (a slow head or
        body, before any key was seen), so that the slots left go to clients that
        send their requests, ``/health`` and authenticated keep-alive connections
        among them. True when one was dropped (its slot is free once it has closed)."""
        if not self.unproven:
            return False
        conn, since = next(iter(self.unproven.items()))
        if time.monotonic() - since < self.slow_s:
            return False
        del self.unproven[conn]
        self.shed += 1
        if conn.transport is not None:
            conn.transport.abort()
        return True

    def closed(self, conn: FrontConnection) -> None:
        self.unproven.pop(conn, None)
        if conn in self.connections:
            self.connections.discard(conn)
            if conn.admitted:
                self.admitted -= 1
                left = self.by_address[conn.peer] - 1
                if left:
                    self.by_address[conn.peer] = left
                else:
                    del self.by_address[conn.peer]
            else:
                self.refusing -= 1
        if not self.connections and self._all_closed is not None:
            self._all_closed.set()

    async def serve(self, conn: FrontConnection, req: FrontRequest) -> None:
        self.unproven.pop(conn, None)  # a whole request came: never shed as slow
        cors: dict[str, str] | None = None
        if self.cors is not None and req.error is None and req.path in self.inference_paths:
            # (a relayed route: the application answers and adds them)
            if is_preflight(req.method, req.headers):
                self._preflight(conn, req, self.cors)
                return
            cors = self.cors.actual(req.headers)
        if req.error is not None:
            self._error(conn, req, req.error, self.new_id(), self._cors_of(req))
        elif req.path in self.inference_paths:
            if req.method == "POST":
                await self._inference(conn, req, cors)
            else:
                self._error(conn, req, not_allowed(req.method, req.path), self.new_id(), cors)
        else:
            await self.relay.forward(conn, req)

    def _cors_of(self, req: FrontRequest) -> dict[str, str] | None:
        return self.cors.actual(req.headers) if self.cors is not None else None

    def _preflight(self, conn: FrontConnection, req: FrontRequest, cors: Cors) -> None:
        rid = self.new_id()
        try:
            status, headers = cors.preflight(req.headers)
        except GatewayError as err:
            self._error(conn, req, err, rid)
            return
        headers["x-request-id"] = rid
        conn.respond(req, status, headers, b"")

    def _error(self, conn: FrontConnection, req: FrontRequest, err: GatewayError,
               rid: str, cors: dict[str, str] | None = None) -> None:
        """``err`` in the envelope of the dialect spoken at the request's path."""
        status, headers, body = error_parts(err, rid, self.dialect_for(req.path))
        if cors:
            headers.update(cors)
        conn.respond(req, status, headers, body)

    async def _inference(self, conn: FrontConnection, req: FrontRequest,
                         cors: dict[str, str] | None = None) -> None:
        rid = self.new_id()
        try:
            reply = await self.routes.run(rid, req.path, req.body, req.headers, conn)
        except GatewayError as err:
            self._error(conn, req, err, rid, cors)
            return
        except Exception:
            log.exception("internal error on %s %s (%s)", req.method, req.path, rid)
            self._error(conn, req, internal_error(), rid, cors)
            return
        if reply.stream is None:
            headers = reply_headers(reply, rid)
            if cors:
                headers.update(cors)
            conn.respond(req, reply.status, headers, reply.body or b"")
            return
        stream, render = reply.stream, reply.render
        started = False
        headers = stream_headers(reply, rid)
        if cors:
            headers.update(cors)
        try:
            conn.start_stream(req, reply.status, headers)
            started = True  # iterated from here: the stream's own finally cleans up
            if render is not None:  # the client's dialect's opening events
                conn.write_chunk(render.start())
            async for event in stream:
                if render is not None:
                    event = render.feed(event)
                    if not event:
                        continue
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
    """The front on host:port, ``app`` (from ``build_app``) behind it on socket
    pairs; the front's deadlines and caps are the app's ``FRONT_LIMITS``.

    ``start`` runs the application's start-up hooks; ``stop`` stops accepting, lets
    requests in flight finish (up to ``shutdown_timeout``), then runs its clean-up.
    """

    def __init__(self, app: web.Application, host: str = "127.0.0.1", port: int = 0, *,
                 reuse_port: bool = False, shutdown_timeout: float = 30.0) -> None:
        self.app = app
        self.host = host
        self._port = port
        self.reuse_port = reuse_port
        self.shutdown_timeout = shutdown_timeout
        self.front: Front | None = None
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
        inner = self._runner.server
        assert inner is not None
        routes = self.app[OPENAI_ROUTES]
        relay = Relay(inner, routes.new_id)
        front = self.front = Front(routes, relay, self.app.get(FRONT_LIMITS),
                                   self.app.get(FRONT_SCREEN), self.app.get(CORS))
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: FrontConnection(front), self.host, self._port,
            reuse_port=self.reuse_port or None, backlog=128)

    async def listen_inner(self, host: str = "127.0.0.1") -> int:
        """Also serves the application itself on ``host``:<a free port> (returned),
        for tests that compare the two servers; ``serve`` never does (the front's
        deadlines and caps would not hold there)."""
        assert self._runner is not None
        site = web.TCPSite(self._runner, host, 0)
        await site.start()
        return int(self._runner.addresses[-1][1])

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
