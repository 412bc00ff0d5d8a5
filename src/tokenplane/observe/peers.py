"""The workers of ``serve --workers N`` hand each other their metrics at scrape time.

Each worker listens on a unix socket of its own, ``<data_dir>/run/metrics-w<i>.sock``
(mode 0600: the gateway's user only); a connection gets that worker's families
(:func:`tokenplane.observe.merge.snapshot`, encoded) and is closed. The worker a scrape
lands on reads its own registry directly and asks its siblings at once, in parallel,
each within ``timeout_s``; a sibling that does not answer (dead, restarting, stuck) is
left out of that scrape. Nothing of this runs on the request path: the request-path
cells stay plain numbers, and the cost is paid by the scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux
MAX_ANSWER = 64 * 1024 * 1024


def socket_path(run_dir: Path, writer_id: str) -> str:
    """Where worker ``writer_id`` answers; a path too long for a unix socket becomes a
    Linux abstract name derived from it."""
    path = str(run_dir / f"metrics-{writer_id}.sock")
    if len(path.encode()) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:24]
    return f"\0tokenplane-{digest}-metrics-{writer_id}"


class MetricsPeers:
    """Worker ``index`` of ``workers``: answers its siblings with ``local()``, and fetches
    theirs (:meth:`fetch`)."""

    def __init__(self, run_dir: Path, index: int, workers: int, local: Callable[[], bytes],
                 timeout_s: float = 2.0) -> None:
        self.run_dir = run_dir
        self.index = index
        self.workers = workers
        self.local = local
        self.timeout_s = timeout_s
        self.path = socket_path(run_dir, f"w{index}")
        self._server: asyncio.AbstractServer | None = None

    @property
    def siblings(self) -> list[str]:
        return [f"w{i}" for i in range(self.workers) if i != self.index]

    async def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if not self.path.startswith("\0"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # left by a worker of this index that died
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._answer, path=self.path)
        finally:
            os.umask(old)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(self.local())
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def fetch(self) -> list[tuple[str, bytes | None]]:
        """Every sibling's encoded families (None for one that did not answer)."""
        ids = self.siblings
        got = await asyncio.gather(*(self._fetch_one(w) for w in ids))
        return list(zip(ids, got, strict=True))

    async def _fetch_one(self, writer_id: str) -> bytes | None:
        try:
            return await asyncio.wait_for(self._read(socket_path(self.run_dir, writer_id)),
                                          self.timeout_s)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return None

    @staticmethod
    async def _read(path: str) -> bytes:
        reader, writer = await asyncio.open_unix_connection(path, limit=MAX_ANSWER)
        try:
            return await reader.read(-1)
        finally:
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
            if not self.path.startswith("\0"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
