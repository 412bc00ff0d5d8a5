"""The write side of a front connection: whole answers, streamed answers (chunked for
HTTP/1.1, ended by the close for HTTP/1.0) and back-pressure (``pause_writing`` /
``resume_writing``). Once the client is gone, writing a stream raises
``ConnectionResetError`` and a whole answer is dropped, as with aiohttp."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from tokenplane.api.front.wire import Closing, FrontRequest, head

_COPY_MAX = 1 << 16  # a larger body is not copied behind its head


class AnswerWriter:
    def __init__(self, server: Closing) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._lost = False
        self._write_paused = False
        self._drain: asyncio.Future[None] | None = None
        self._chunked = False  # the stream being written is chunk-framed
        self._on_gone: Callable[[], None] | None = None
        self.stalled = False  # a stream was ended: the client read nothing for too long

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        d = self._drain
        if d is not None and not d.done():
            d.set_result(None)

    @property
    def gone(self) -> bool:
        return self._lost or self.transport is None or self.transport.is_closing()

    def on_gone(self, callback: Callable[[], None] | None) -> None:
        """``callback`` runs once if the client closes the connection (the request
        being served cancels its upstream call); ``None`` clears it."""
        self._on_gone = callback

    def _gone_now(self) -> None:
        cb = self._on_gone
        if cb is not None:
            self._on_gone = None
            cb()

    def _write(self, data: bytes) -> None:
        if not self.gone:
            assert self.transport is not None
            self.transport.write(data)

    def respond(self, req: FrontRequest, status: int, headers: Mapping[str, str], body: bytes,
                *, head_only: bool = False) -> None:
        """A whole answer; dropped if the client is gone. ``head_only`` (always for
        HEAD): the head, with the body's length."""
        if self.gone:
            return
        if self.server.closing:
            req.keep_alive = False
        framing = "" if status in (204, 304) else f"content-length: {len(body)}\r\n"
        data = head(req, status, headers, framing)
        t = self.transport
        assert t is not None
        if head_only or req.method == "HEAD" or not body:
            t.write(data)
        elif len(body) > _COPY_MAX:
            t.writelines((data, body))
        else:
            t.write(data + body)

    def start_stream(self, req: FrontRequest, status: int, headers: Mapping[str, str]) -> None:
        """The head of an answer whose body follows in pieces: chunked for HTTP/1.1,
        ended by the close for HTTP/1.0. Raises ConnectionResetError if the client is
        gone."""
        if self.gone:
            raise ConnectionResetError("the client closed the connection")
        self._chunked = req.version != "1.0"
        if self.server.closing or not self._chunked:
            req.keep_alive = False
        assert self.transport is not None
        self.transport.write(head(req, status, headers,
                                  "transfer-encoding: chunked\r\n" if self._chunked else ""))

    def write_chunk(self, data: bytes) -> None:
        """A piece of the body; raises ConnectionResetError if the client is gone. Call
        :meth:`drain` after it."""
        if not data:
            return
        if self.gone:
            raise ConnectionResetError("the client closed the connection")
        assert self.transport is not None
        self.transport.write(b"%x\r\n%b\r\n" % (len(data), data) if self._chunked else data)

    @property
    def write_paused(self) -> bool:
        return self._write_paused

    async def drain(self) -> None:
        """Waits while the socket's write buffer is full (the client reads slowly)."""
        if self._lost:
            raise ConnectionResetError("the client closed the connection")
        if not self._write_paused:
            return
        self._drain = self._loop.create_future()
        try:
            await self._drain
        finally:
            self._drain = None

    def end_stream(self) -> None:
        if self._chunked and not self.gone:
            assert self.transport is not None
            self.transport.write(b"0\r\n\r\n")
        self._chunked = False
