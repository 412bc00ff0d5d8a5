"""The write side of a front connection: whole answers, streamed answers (chunked for
HTTP/1.1, ended by the close for HTTP/1.0) and back-pressure (``pause_writing`` /
``resume_writing``). Once the client is gone, writing a stream raises
``ConnectionResetError`` and a whole answer is dropped, as with aiohttp.

A stream's connection gets small buffers (``_STREAM_HIGH`` in the transport, at most
``_STREAM_UNSENT`` not yet sent in the kernel: ``TCP_NOTSENT_LOWAT``, which bounds the
kernel's queue without turning off its send-buffer autotuning), so a client that stops
reading stops the relay (and so the reading of the upstream) after a few tens of KiB
beyond what its own receive window holds, and :meth:`AnswerWriter.drain` fails with
:class:`ClientStalled` when it has read nothing for the stall time.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Mapping

from tokenplane.api.front.wire import Closing, FrontRequest, head

_COPY_MAX = 1 << 16  # a larger body is not copied behind its head
_STREAM_HIGH = 1 << 14  # a stream's transport buffer: writing pauses above this
_STREAM_UNSENT = 1 << 14  # and the kernel holds at most this much not yet sent
_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", None)  # Linux, macOS


class ClientStalled(ConnectionError):
    """The client read nothing of its stream for the stall time."""


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
        self._small = False  # the stream buffers are set on this connection

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
        if not self._small:
            self._small_buffers(self.transport)
        self.transport.write(head(req, status, headers,
                                  "transfer-encoding: chunked\r\n" if self._chunked else ""))

    def _small_buffers(self, t: asyncio.Transport) -> None:
        self._small = True
        t.set_write_buffer_limits(high=_STREAM_HIGH)
        sock = t.get_extra_info("socket")
        if sock is not None and _NOTSENT_LOWAT is not None:
            with contextlib.suppress(OSError):  # not TCP (a test's pipe), or not allowed
                sock.setsockopt(socket.IPPROTO_TCP, _NOTSENT_LOWAT, _STREAM_UNSENT)

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

    async def drain(self, stall_s: float = 0.0) -> None:
        """Waits while the socket's write buffer is full (the client reads slowly);
        raises :class:`ClientStalled` if it stays full for ``stall_s`` (0: no limit)."""
        if self._lost:
            raise ConnectionResetError("the client closed the connection")
        if not self._write_paused:
            return
        d = self._drain = self._loop.create_future()
        timer = self._loop.call_later(stall_s, self._stall, d) if stall_s > 0 else None
        try:
            await d
        finally:
            self._drain = None
            if timer is not None:
                timer.cancel()

    def _stall(self, d: asyncio.Future[None]) -> None:
        if not d.done():
            self.stalled = True
            d.set_exception(ClientStalled("the client read nothing of its stream"))

    def end_stream(self) -> None:
        if self._chunked and not self.gone:
            assert self.transport is not None
            self.transport.write(b"0\r\n\r\n")
        self._chunked = False
