"""The counter server of one host: ``serve --workers N`` without Redis runs it in the
parent process, so every worker admits against the same counters.

One :class:`CounterBook` (the in-process store's functional core, the semantics the
Redis script mirrors) answers every worker over a Unix socket. The server runs on its
own thread and event loop; each operation runs to completion before the next, so it
is atomic across every scope of a request exactly as in one process. Workers renew
their concurrency leases with a heartbeat, so a worker that dies gives its units back
within ``lease_s``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from tokenplane.admission.book import CounterBook, Wire
from tokenplane.admission.stores.local_wire import FrameReader, frame

log = logging.getLogger("tokenplane.admission")
# set by the serve parent for its workers: where the server listens, how many share it
SOCKET_ENV = "TOKENPLANE_ADMISSION_SOCKET"
WORKERS_ENV = "TOKENPLANE_ADMISSION_WORKERS"


def _wires(raw: Sequence[Sequence[Any]]) -> list[Wire]:
    return [cast(Wire, tuple(w)) for w in raw]


def answer(book: CounterBook, op: str, tenant: str, p: dict[str, Any]) -> list[int]:
    """Run one operation on ``book``: the same raw answer as the Redis script."""
    if op == "reserve":
        try:
            return book.reserve(tenant, p["rid"], _wires(p["l"]), p["v"], p["now"], p["ttl"],
                                int(p.get("ls", 0)))
        except ValueError:
            return [-2]
    if op == "debit":
        return book.debit(p["rid"], _wires(p["l"]), p["v"], p["now"])
    if op == "reconcile":
        return book.reconcile(p["rid"], _wires(p["l"]), p["v"], p["now"])
    if op == "status":
        return book.status(tenant, _wires(p["l"]), p["now"])
    if op == "renew":
        return book.renew(tenant, p["rids"], p["now"], int(p["ls"]))
    raise ValueError(f"unknown admission op {op!r}")


class _Conn(asyncio.Protocol):
    def __init__(self, book: CounterBook, conns: set[_Conn]) -> None:
        self.book = book
        self.conns = conns
        self.reader = FrameReader()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conns.discard(self)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        try:
            requests = self.reader.feed(data)
            out = [frame(answer(self.book, op, tenant, p)) for op, tenant, p in requests]
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            log.error("admission counter server: bad request from a worker: %s", exc)
            self.transport.close()
            return
        if out:
            self.transport.write(b"".join(out))


class CounterServer:
    """Serves one book on a Unix socket from a thread of its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.book = CounterBook()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._conns: set[_Conn] = set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tokenplane-admission",
                                        daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError(f"admission counter server failed: {self._error}")

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            if self.path.exists():
                self.path.unlink()
            server = loop.run_until_complete(
                loop.create_unix_server(lambda: _Conn(self.book, self._conns), str(self.path)))
            os.chmod(self.path, 0o600)
        except OSError as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            for conn in list(self._conns):
                if conn.transport is not None:
                    conn.transport.close()
            loop.run_until_complete(server.wait_closed())
            loop.close()

    def join(self) -> None:
        """Block while the server runs (until :meth:`stop`)."""
        if self._thread is not None:
            self._thread.join()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
        if self.path.exists():
            self.path.unlink()
