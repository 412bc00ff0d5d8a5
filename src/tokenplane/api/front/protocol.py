"""One client connection of the HTTP/1.1 front (``api/front/server.py``).

Requests are parsed with ``httptools`` (llhttp) and answered strictly in order: a
request that arrives while another is being answered (pipelining) waits in a queue,
and the socket stops being read when too many wait. What the front answers itself
(a malformed request: 400; a head over 64 KiB: 431; a body over the limit: 413) ends
the connection: the answer is sent, the write side closed, and what the client still
sends is read and dropped for a moment so that it sees the answer rather than a reset.

Between requests the connection stays open (HTTP/1.1, or HTTP/1.0 with keep-alive)
until it has been idle for ``keepalive_s``. A request must come in on time, however
its bytes trickle in: its head within ``header_timeout_s`` of its first byte (the
first request of a connection: of the accept), its body within ``body_timeout_s``
plus a second per ``body_min_rate`` bytes received; late, it is answered 408 and the
connection ends (slowloris). A connection the front cannot take (over its caps) is
answered 503 at once, before anything is read (``Server.opened``).

A client that goes away (its FIN or reset ends the connection) is noticed at once: the
request being served is not cancelled as a whole (its finishers must run), but the
upstream call it waits on is (``pipeline/client_watch.py``: the upstream connection is
dropped, the engine aborts, the ledger says ``cancelled`` / 499); what a stream writes
next fails with ``ConnectionResetError`` (the stream then stops and closes, which
cancels the upstream request), and a whole answer is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Protocol, cast

import httptools
from multidict import CIMultiDict

from tokenplane.api.front.screen import SCREEN_BYTES
from tokenplane.api.front.wire import (
    FrontRequest,
    bad_request,
    blank_request,
    head_too_large,
    request_timeout,
)
from tokenplane.api.front.writer import AnswerWriter
from tokenplane.api.openai_routes import too_large
from tokenplane.errors import GatewayError

log = logging.getLogger("tokenplane.api")

_QUEUE_MAX = 8  # pipelined requests waiting before the socket stops being read
_LINGER_S = 5.0  # after a refusal: how long what the client still sends is dropped
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
HEAD_MAX = 1 << 16  # request line and headers (the relayed app is held to the same)


class Server(Protocol):
    """What a connection needs from the front that accepted it."""

    max_body: int
    keepalive_s: float
    header_timeout_s: float
    body_timeout_s: float
    body_min_rate: int  # bytes per second; 0: the body has body_timeout_s in all
    closing: bool

    async def serve(self, conn: FrontConnection, req: FrontRequest) -> None: ...

    def screen(self, req: FrontRequest) -> GatewayError | None:
        """A refusal for a request on its head alone (``api/front/screen.py``)."""
        ...

    def opened(self, conn: FrontConnection) -> GatewayError | None:
        """Takes the new connection, or the refusal to answer it with (it may also
        have dropped it)."""
        ...

    def closed(self, conn: FrontConnection) -> None: ...


class FrontConnection(AnswerWriter, asyncio.Protocol):
    server: Server

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        self._parser = httptools.HttpRequestParser(self)
        self._queue: deque[FrontRequest] = deque()
        self._busy = False  # a request is being answered
        self._task: asyncio.Task[None] | None = None
        self._discard = False  # refusing: incoming data is dropped until the close
        self._read_paused = False
        self._want_continue = False  # a 100 Continue is owed once it is this one's turn
        self._last = 0.0  # loop time of the last activity
        self._timer: asyncio.TimerHandle | None = None
        # loop times the message being received counts from: its head (a new
        # connection: the accept) and its body; -1 when not receiving that part
        self._head_t0 = -1.0
        self._body_t0 = -1.0
        self.peer = ""  # the client's address (the front's per-address cap)
        self.admitted = False  # counted against the front's caps
        # the message being parsed
        self._url = b""
        self._hdrs: list[tuple[str, str]] = []
        self._head_size = 0
        self._body: list[bytes] = []
        self._size = 0
        self._req: FrontRequest | None = None
        self._newest: FrontRequest | None = None

    # -- asyncio.Protocol -----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        now = self._last = self._head_t0 = self._loop.time()
        self._timer = self._loop.call_at(now + self.server.header_timeout_s, self._tick)
        refusal = self.server.opened(self)
        if refusal is not None:
            self._refuse(blank_request(), refusal)

    def data_received(self, data: bytes) -> None:
        if self._discard:
            return
        self._last = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # answered as a plain request (no route upgrades), then the connection ends
            self._discard = True
            if self._newest is not None:
                self._newest.keep_alive = False
        except httptools.HttpParserError as exc:
            if isinstance(exc, httptools.HttpParserCallbackError):
                log.exception("front: a parser callback failed")
            if not self._discard:
                req = self._req or blank_request()
                self._refuse(req, bad_request(str(exc.args[0] if exc.args else exc)))
        if self._head_t0 >= 0 or self._body_t0 >= 0:  # a request is partly in
            self._watch()

    def eof_received(self) -> bool | None:
        return None  # close; a pipelined request not yet answered is dropped

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._queue.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        d = self._drain
        if d is not None and not d.done():
            d.set_exception(ConnectionResetError("the client closed the connection"))
        self._gone_now()
        if self._task is None:  # else when its request ends: a stop waits for it
            self.server.closed(self)

    # -- httptools callbacks --------------------------------------------------------
    def on_message_begin(self) -> None:
        if self._head_t0 < 0:
            self._head_t0 = self._last

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._head_size += len(url)
        if self._head_size > HEAD_MAX and not self._discard:
            self._refuse(blank_request(), head_too_large(HEAD_MAX))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._hdrs.append((name.decode("latin-1"), value.decode("latin-1")))
        self._head_size += len(name) + len(value)
        if self._head_size > HEAD_MAX and not self._discard:
            self._refuse(blank_request(), head_too_large(HEAD_MAX))

    def on_headers_complete(self) -> None:
        if self._discard:
            return
        self._head_t0 = -1.0
        self._body_t0 = self._last
        p = self._parser
        target = self._url.decode("latin-1")
        headers = CIMultiDict(self._hdrs)
        self._url = b""
        self._hdrs = []
        self._head_size = 0
        req = self._req = FrontRequest(p.get_method().decode("ascii"), target,
                                       target.partition("?")[0], p.get_http_version(), headers)
        length = headers.get("content-length")
        if length is not None and int(length) > self.server.max_body:  # llhttp checked it
            self._refuse(req, too_large(int(length), self.server.max_body))
            return
        if length is not None and int(length) >= SCREEN_BYTES:
            refusal = self.server.screen(req)  # refused anyway: not worth reading
            if refusal is not None:
                self._refuse(req, refusal)
                return
        expect = headers.get("expect")
        if expect is not None and expect.lower() == "100-continue" and req.version == "1.1":
            if self._busy or self._queue:
                self._want_continue = True  # after the answers before it
            else:
                self._write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        if self._discard:
            return
        self._size += len(body)
        if self._size > self.server.max_body:  # a chunked body (a length was checked)
            assert self._req is not None
            self._refuse(self._req, too_large())
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._discard:
            return
        req = self._req
        assert req is not None
        self._req = None
        self._body_t0 = -1.0
        if self._body:
            req.body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
            self._body = []
            self._size = 0
        if self._hdrs:  # trailer fields of a chunked body: not the next request's headers
            self._hdrs = []
            self._head_size = 0
        req.keep_alive = self._parser.should_keep_alive()
        self._want_continue = False
        self._push(req)

    # -- the queue ------------------------------------------------------------------
    def _refuse(self, req: FrontRequest, err: GatewayError) -> None:
        """Answers ``err`` in turn, then ends the connection; nothing more is parsed."""
        self._discard = True
        self._body = []
        self._req = None
        self._want_continue = False
        self._head_t0 = self._body_t0 = -1.0
        req.error = err
        req.keep_alive = False
        self._push(req)

    def _push(self, req: FrontRequest) -> None:
        self._newest = req
        if not self._busy:
            self._start(req)
            return
        self._queue.append(req)
        if len(self._queue) >= _QUEUE_MAX and not self._read_paused and self.transport:
            self._read_paused = True
            self.transport.pause_reading()

    def _start(self, req: FrontRequest) -> None:
        self._busy = True
        self._task = self._loop.create_task(self._serve(req))

    async def _serve(self, req: FrontRequest) -> None:
        try:
            await self.server.serve(self, req)
        except Exception:  # serve answers every failure itself: a bug, end the connection
            log.exception("front: failed on %s %s", req.method, req.path)
            req.keep_alive = False
        finally:
            self._task = None
            if self._lost:  # the client left mid-request; the request has now ended
                self.server.closed(self)
            self._done(req)

    def _done(self, req: FrontRequest) -> None:
        self._busy = False
        t = self.transport
        if self._lost or t is None:
            return
        if not req.keep_alive or self.server.closing:
            if req.error is not None:
                self._linger(t)
            else:
                t.close()
            return
        now = self._last = self._loop.time()
        if self._queue:
            self._start(self._queue.popleft())
        elif self._want_continue:
            self._want_continue = False
            self._write(_CONTINUE)
            if self._body_t0 >= 0:
                self._body_t0 = now  # the body was waiting for this
        if self._read_paused and len(self._queue) < _QUEUE_MAX // 2:
            self._read_paused = False
            t.resume_reading()
            if self._head_t0 >= 0 or self._body_t0 >= 0:  # it could not come while paused
                self._head_t0 = now if self._head_t0 >= 0 else -1.0
                self._body_t0 = now if self._body_t0 >= 0 else -1.0
                self._watch()
        timer = self._timer
        if not self._busy and timer is not None \
                and timer.when() > now + self.server.keepalive_s:
            timer.cancel()  # idle now: the keep-alive timeout applies
            self._timer = self._loop.call_at(now + self.server.keepalive_s, self._tick)

    def _linger(self, t: asyncio.Transport) -> None:
        """Closes the write side and drops what still comes until the client closes
        (closing with unread data would reset the connection under the answer)."""
        self._discard = True
        if self._read_paused:
            self._read_paused = False
            t.resume_reading()
        if not t.can_write_eof():
            t.close()
            return
        t.write_eof()
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(_LINGER_S, t.close)

    def _deadline(self) -> float:
        """When the request being received must be in (loop time; -1: none is, or it
        cannot come now because reading is paused)."""
        if self._discard or self._read_paused:
            return -1.0
        srv = self.server
        if self._head_t0 >= 0:
            return self._head_t0 + srv.header_timeout_s
        if self._body_t0 >= 0:
            rate = srv.body_min_rate
            return self._body_t0 + srv.body_timeout_s + (self._size / rate if rate else 0.0)
        return -1.0

    def _watch(self) -> None:
        """Makes the timer fire no later than the deadline of the request coming in."""
        due = self._deadline()
        timer = self._timer
        if due >= 0 and (timer is None or timer.when() > due):
            if timer is not None:
                timer.cancel()
            self._timer = self._loop.call_at(due, self._tick)

    def _tick(self) -> None:
        """The connection's one timer: a request that is late coming in is answered
        408 (its head, its body); an idle connection closes after ``keepalive_s``."""
        self._timer = None
        t = self.transport
        if self._lost or t is None:
            return
        now = self._loop.time()
        due = self._deadline()
        if due >= 0:
            if now >= due:
                self._late(now)
                return
            wait = due - now
        elif self._busy or self._discard:
            wait = self.server.keepalive_s
        else:
            wait = self._last + self.server.keepalive_s - now
            if wait <= 0:
                t.close()
                return
        self._timer = self._loop.call_at(now + wait, self._tick)

    def _late(self, now: float) -> None:
        if self._head_t0 >= 0:
            err = request_timeout("request line and headers", self.server.header_timeout_s)
            req = blank_request()
        else:
            err = request_timeout("request body", now - self._body_t0)
            req = self._req or blank_request()
        log.info("front: %s from %s", err.message, self.peer or "?")
        self._refuse(req, err)
        if self._timer is None and not self._lost:  # until the answer's linger takes over
            self._timer = self._loop.call_at(now + self.server.keepalive_s, self._tick)

    # -- for the server: shutdown ---------------------------------------------------
    def shutdown(self) -> None:
        """Graceful: an idle connection closes now, a busy one after its answer."""
        self._queue.clear()
        if self.transport is not None and not self._busy:
            self.transport.close()

    def abort(self) -> asyncio.Task[None] | None:
        """Drops the connection and cancels the request being served (returned)."""
        if self.transport is not None:
            self.transport.abort()
        task = self._task
        if task is not None:
            task.cancel()
        return task
