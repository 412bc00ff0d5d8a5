"""The workers' side of the host-local counter store (``serve --workers N`` without
Redis): each operation is one frame over a Unix socket to the counter server in the
serve parent (:mod:`local_server`), answered in order on one connection."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, cast

from tokenplane.admission.stores.base import StoreUnavailable
from tokenplane.admission.stores.local_wire import FrameReader, frame
from tokenplane.admission.stores.scripted import ScriptedStore


class _Client(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = FrameReader()
        self.waiting: deque[asyncio.Future[list[int]]] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        for answer in self.reader.feed(data):
            fut = self.waiting.popleft()
            if not fut.done():  # a caller that timed out left its place in the line
                fut.set_result(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        while self.waiting:
            fut = self.waiting.popleft()
            if not fut.done():
                fut.set_exception(StoreUnavailable(
                    "admission store (the serve parent's counter server) closed the "
                    "connection"))


class LocalStore(ScriptedStore):
    """Counters shared by the workers of one host through the serve parent."""

    def __init__(self, path: str, *, timeout_s: float = 0.5, lease_s: float = 0.0) -> None:
        super().__init__(lease_s=lease_s)
        self.path = path
        self.timeout_s = timeout_s
        self._conn: _Client | None = None
        self.calls = 0

    async def _connect(self) -> _Client:
        conn = self._conn
        if conn is not None and not conn.lost:
            return conn
        loop = asyncio.get_running_loop()
        try:
            _, proto = await asyncio.wait_for(
                loop.create_unix_connection(_Client, self.path), self.timeout_s)
        except (OSError, TimeoutError) as exc:
            raise StoreUnavailable(
                f"admission store (the serve parent's counter server at {self.path}) "
                f"unreachable: {exc}") from exc
        self._conn = proto
        return proto

    async def _call(self, op: str, tenant: str, payload: dict[str, Any]) -> list[int]:
        conn = await self._connect()
        assert conn.transport is not None
        fut: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        conn.waiting.append(fut)
        conn.transport.write(frame([op, tenant, payload]))
        self.calls += 1
        try:
            return await asyncio.wait_for(fut, self.timeout_s)
        except TimeoutError as exc:
            raise StoreUnavailable(
                f"admission store (the serve parent's counter server) did not answer in "
                f"{self.timeout_s}s") from exc

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and conn.transport is not None:
            conn.transport.close()
