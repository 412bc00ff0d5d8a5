"""A small HTTP/1.1 client on asyncio protocols: keep-alive connections to one origin.

The gateway's upstream calls are all alike (a POST with a JSON body, answered by a
JSON body or an SSE stream), so they do not need a general-purpose client. This one
writes each request with a single ``transport.write``, parses the answer with
``httptools`` (the C parser uvicorn uses), hands body bytes on as they arrive, and
keeps connections open for reuse. Measured in ``bench/bench_gateway.py``, it costs a
fraction of the CPU per request of ``aiohttp.ClientSession``.

What it does not do, on purpose: redirects, cookies, proxies, compression (it never
asks for it; a compressed answer is refused), HTTP/2. A response that arrives without
a complete message, or a connection that breaks, fails its request; the connection is
never reused after anything unexpected.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools

# buffered body bytes at which the socket stops being read: a stream whose client
# stops reading stops the relay, and the upstream is read no further than this
_PAUSE_AT = 1 << 16


class H1Error(Exception):
    """The connection broke or the answer was not valid HTTP/1.1."""


class H1ConnectError(H1Error):
    """No connection could be opened (refused, unreachable, DNS, TLS)."""


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str
    port: int
    prefix: str  # path of the base URL, prepended to every request path

    @classmethod
    def parse(cls, base_url: str) -> Origin:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


class H1Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.idle_since = 0.0
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.error: BaseException | None = None
        self.received = False
        self._whole = False  # read_all: the body is wanted at once, never pause

    # -- asyncio.Protocol -----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(H1Error("upstream tried to upgrade the connection"))
        except (httptools.HttpParserError, httptools.HttpParserCallbackError) as exc:
            self._fail(H1Error(f"invalid HTTP from upstream: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.complete and self.error is None:
            if self.headers_done and self._delimited_by_close():
                self.complete = True  # a body that ends with the connection
            else:
                self.error = H1Error("upstream closed the connection")
        self._wake()

    def _delimited_by_close(self) -> bool:
        h = self.headers
        return "content-length" not in h and "chunked" not in h.get("transfer-encoding", "")

    def pause_writing(self) -> None:  # the request is written at once; nothing to do
        pass

    def resume_writing(self) -> None:
        pass

    # -- httptools callbacks --------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        old = self.headers.get(key)
        self.headers[key] = text if old is None else f"{old}, {text}"

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        if self.status < 200:  # 1xx: an interim answer, the real one follows
            self.headers = {}
            return
        encoding = self.headers.get("content-encoding", "identity").lower()
        if encoding not in ("identity", ""):
            self._fail(H1Error(f"upstream sent a {encoding}-encoded body that was not asked for"))
            return
        self.headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        self._buffered += len(body)
        if (self._buffered >= _PAUSE_AT and not self._paused and not self._whole
                and self.transport is not None):
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.status < 200:
            return
        self.keep_alive = self._parser.should_keep_alive()  # valid only in this callback
        self.complete = True
        self._wake()

    # -- request side -------------------------------------------------------------
    def _fail(self, exc: BaseException) -> None:
        self.error = exc
        self.close()
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def _wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def send(self, data: bytes) -> None:
        self._reset()
        assert self.transport is not None
        self.transport.write(data)

    async def head(self) -> tuple[int, dict[str, str]]:
        """Waits for the status line and headers."""
        while not self.headers_done:
            if self.error is not None:
                raise self.error
            await self._wait()
        return self.status, self.headers

    async def read_all(self, idle_s: float | None = None) -> bytes:
        """The rest of the body; TimeoutError if nothing arrives for ``idle_s``."""
        self._whole = True
        self._resume()
        while not self.complete:
            if self.error is not None:
                raise self.error
            if idle_s is None:
                await self._wait()
                continue
            async with asyncio.timeout(idle_s):
                await self._wait()
        body = b"".join(self._chunks)
        self._chunks.clear()
        self._buffered = 0
        return body

    async def read_some(self) -> bytes:
        """What arrived since the last call (waiting if nothing did); ``b""`` at the end."""
        while not self._chunks:
            if self.complete:
                return b""
            if self.error is not None:
                raise self.error
            await self._wait()
        data = b"".join(self._chunks) if len(self._chunks) > 1 else self._chunks[0]
        self._chunks.clear()
        self._buffered = 0
        self._resume()
        return data

    def _resume(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    @property
    def reusable(self) -> bool:
        return (self.complete and self.error is None and self.transport is not None
                and not self.transport.is_closing() and self.keep_alive)

    def close(self) -> None:
        """Drops the connection; for a request in flight, the upstream sees the client
        leave (vLLM and SGLang then abort the request)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()


class H1Pool:
    """Keep-alive connections to one origin. Idle connections are reused newest first
    and dropped after ``idle_timeout_s`` (below the usual 5 s server keep-alive)."""

    def __init__(self, base_url: str, *, max_idle: int = 256, idle_timeout_s: float = 4.0,
                 ssl_context: ssl.SSLContext | None = None,
                 open_socket: Callable[[], Awaitable[socket.socket]] | None = None) -> None:
        """``open_socket``: connections go over the sockets it gives (already
        connected) instead of to the base URL's host and port."""
        self.origin = Origin.parse(base_url)
        self._open_socket = open_socket
        self.max_idle = max_idle
        self.idle_timeout_s = idle_timeout_s
        self._ssl: ssl.SSLContext | None = None
        if self.origin.scheme == "https":
            self._ssl = ssl_context or ssl.create_default_context()
        self._idle: list[H1Connection] = []
        self._head = (f"\r\nhost: {self.origin.host_header}\r\n").encode("latin-1")
        self.opened = 0

    def _idle_conn(self) -> H1Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None and not conn.transport.is_closing() \
                    and now - conn.idle_since < self.idle_timeout_s and not conn.received:
                return conn
            conn.close()
        return None

    async def _connect(self, timeout_s: float | None) -> H1Connection:
        loop = asyncio.get_running_loop()
        o = self.origin
        try:
            async with asyncio.timeout(timeout_s):
                if self._open_socket is not None:
                    sock = await self._open_socket()
                    _, conn = await loop.create_connection(H1Connection, sock=sock)
                else:
                    _, conn = await loop.create_connection(
                        H1Connection, o.host, o.port, ssl=self._ssl,
                        server_hostname=o.host if self._ssl else None)
        except TimeoutError:
            raise H1ConnectError(f"connect to {o.host}:{o.port} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise H1ConnectError(f"{type(exc).__name__}: {exc}") from None
        self.opened += 1
        return conn

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes,
                      connect_timeout_s: float | None = None) -> H1Connection:
        """Sends the request on an idle or new connection and returns that connection;
        read the answer from it, then :meth:`release` it."""
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
                raise ValueError(f"invalid header {name!r}")
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        data = b"".join((method.encode("ascii"), b" ", (self.origin.prefix + path).encode(),
                         b" HTTP/1.1", self._head, lines.encode("latin-1"),
                         b"content-length: %d\r\n\r\n" % len(body), body))
        conn = self._idle_conn() or await self._connect(connect_timeout_s)
        conn.send(data)
        return conn

    def release(self, conn: H1Connection) -> None:
        """Back to the pool if the whole answer was read and the server keeps the
        connection open; closed otherwise."""
        if conn.reusable and len(self._idle) < self.max_idle:
            conn.idle_since = time.monotonic()
            conn.received = False
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
