"""The access log: one JSON line per request, written off the request path.

The request path only appends an encoded line to a list (no lock: the event-loop
thread is the only writer). Every ``flush_s`` (and whenever ``batch_lines`` have
gathered) the lines are joined and handed to a writer thread through a queue, which
writes them with one ``write`` to stderr or to the file (opened for appending, so
several workers can share it: each write holds whole lines). A slow disk or a full
stderr pipe therefore never stalls a request.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import select
import stat
import sys
import threading
import time
from collections.abc import Callable

from tokenplane.periodic import Periodic

log = logging.getLogger("tokenplane.access")


class AccessLog:
    """Collects encoded lines and writes them from a thread. ``sample`` is the share of
    successful requests written (errors are always written)."""

    def __init__(self, path: str | None = None, sample: float = 1.0, *,
                 flush_s: float = 0.2, batch_lines: int = 512,
                 rand: Callable[[], float] = random.random, fd: int | None = None) -> None:
        self.path = path
        self._given_fd = fd  # with no path: this descriptor (default: stderr's)
        self.sample = sample
        self.batch_lines = batch_lines
        self._rand = rand
        self._lines: list[bytes] = []
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._fd: int | None = None
        self._second = -1
        self._prefix = ""
        self._flusher = Periodic("access-log-flush", flush_s, self._flush_step, log=log,
                                 failure="access log flush failed")

    def stamp(self, t: float) -> str:
        """``t`` (epoch seconds) as ISO 8601 UTC with milliseconds; the date and time of
        day are formatted once per second (``datetime.isoformat`` per line would cost
        more than the rest of the line)."""
        second = int(t)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._prefix}.{int((t - second) * 1000):03d}Z"

    def wants(self, ok: bool) -> bool:
        """Whether a request with this outcome is written (sampling successes only)."""
        return not ok or self.sample >= 1.0 or self._rand() < self.sample

    def add(self, line: bytes) -> None:
        """Queue one encoded line (ending in a newline); called on the event loop."""
        lines = self._lines
        lines.append(line)
        if len(lines) >= self.batch_lines:
            self.flush()

    def flush(self) -> None:
        if self._lines:
            chunk = b"".join(self._lines)
            self._lines.clear()
            self._queue.put(chunk)

    async def _flush_step(self) -> None:
        self.flush()

    def start(self) -> None:
        if self._thread is not None:
            return
        if self.path is None:
            self._fd = self._given_fd if self._given_fd is not None else sys.stderr.fileno()
        else:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        self._thread = threading.Thread(target=self._write_loop, name="access-log",
                                        daemon=True)
        self._thread.start()
        self._flusher.start()

    async def close(self) -> None:
        await self._flusher.close()
        self.flush()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._queue.put(None)
        thread.join()
        if self.path is not None and self._fd is not None:
            os.close(self._fd)
        self._fd = None

    def _write_loop(self) -> None:
        fd = self._fd
        assert fd is not None
        # a pipe shared by several workers (stderr under a supervisor) keeps a write
        # whole only up to PIPE_BUF bytes: write it in pieces of whole lines that size
        piece = None if stat.S_ISREG(os.fstat(fd).st_mode) else select.PIPE_BUF
        while True:
            chunk = self._queue.get()
            if chunk is None:
                return
            try:
                for part in _pieces(chunk, piece):
                    view = memoryview(part)
                    while view:
                        n = os.write(fd, view)
                        view = view[n:]
            except OSError as exc:  # never take the gateway down for its access log
                log.warning("access log write failed: %s", exc)


def _pieces(chunk: bytes, limit: int | None) -> list[bytes]:
    """``chunk`` (whole lines) cut at line ends into pieces of at most ``limit`` bytes
    where it can be (a longer line is a piece of its own)."""
    if limit is None or len(chunk) <= limit:
        return [chunk]
    out: list[bytes] = []
    start = 0
    while start < len(chunk):
        end = chunk.rfind(b"\n", start, start + limit)
        if end < 0:  # one line longer than the limit
            end = chunk.find(b"\n", start + limit)
            end = len(chunk) - 1 if end < 0 else end
        out.append(chunk[start:end + 1])
        start = end + 1
    return out
