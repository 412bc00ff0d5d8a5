"""The workers of ``serve --workers N`` hand each other their metrics at scrape time.

Each worker listens on a unix socket of its own, ``<data_dir>/run/metrics-w<i>.sock``
(mode 0600: the gateway's user only); a connection gets that worker's families
(:func:`tokenplane.observe.merge.snapshot`, encoded) and is closed. The worker a scrape
lands on reads its own registry directly and asks its siblings at once, in parallel,
each within ``timeout_s``; a sibling that does not answer (dead, restarting, stuck) is
left out of that scrape. Nothing of this runs on the request path: the request-path
cells stay plain numbers, and the cost is paid by the scrape.

So that the gateway's sums never go down when a worker dies (Prometheus would read a
drop as a counter reset), a worker writes what it answers to
``<data_dir>/run/metrics-w<i>.last`` before answering; a scrape uses that file for a
sibling that does not answer, and the worker that replaces a dead one adds its counts
to its own (:func:`tokenplane.observe.merge.add_counts`). What the dead worker counted
after its last answer is lost from the metrics (never from the ledger). ``serve``
removes these files when the gateway starts, so a new gateway counts from zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux
MAX_ANSWER = 64 * 1024 * 1024


def last_path(run_dir: Path, writer_id: str) -> Path:
    """Where worker ``writer_id`` keeps what it last answered."""
    return run_dir / f"metrics-{writer_id}.last"


def clear_last(run_dir: Path) -> None:
    """Forget the workers' last answers (a new gateway counts from zero)."""
    for path in run_dir.glob("metrics-w*.last"):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def read_last(run_dir: Path, writer_id: str) -> bytes | None:
    try:
        return last_path(run_dir, writer_id).read_bytes()
    except OSError:
        return None


def socket_path(run_dir: Path, writer_id: str) -> str:
    """Where worker ``writer_id`` answers. A data directory too deep for a unix socket
    path (108 bytes) gets a short one in ``$TMPDIR/tokenplane-<uid>/`` (mode 0700),
    named for a hash of the directory."""
    path = str(run_dir / f"metrics-{writer_id}.sock")
    if len(path.encode()) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:24]
    short = Path(tempfile.gettempdir()) / f"tokenplane-{os.getuid()}"
    short.mkdir(mode=0o700, exist_ok=True)
    return str(short / f"{digest}-{writer_id}.sock")


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
        self.writer_id = f"w{index}"
        self.path = socket_path(run_dir, self.writer_id)
        self._server: asyncio.AbstractServer | None = None
        # what a dead worker of this index last answered (read at start), else None
        self.inherited: bytes | None = None

    def save_last(self, data: bytes) -> None:
        """Keep ``data`` (what this worker is about to answer) for a replacement."""
        path = last_path(self.run_dir, self.writer_id)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    @property
    def siblings(self) -> list[str]:
        return [f"w{i}" for i in range(self.workers) if i != self.index]

    async def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.inherited = read_last(self.run_dir, self.writer_id)
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
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
