"""Moving committed journal batches into the ledger, and replaying what is left.

The live path: the journal's writer thread ``submit``s each committed batch; the
flusher task coalesces batches up to ``max_rows``, writes them to the sink in one
transaction, then atomically records the journal position it reached
(``checkpoint.json``) and deletes segments wholly before it.

The recovery path (``replay_writer_dir``): read a writer's segments from its
checkpoint on, stopping at a torn tail, and write them to the sink in chunks. Both
paths rely on the sink being idempotent on ``(request_id, attempt)``: a crash between
the sink commit and the checkpoint only means the next replay rewrites rows the
ledger already holds, which it ignores (and does not count twice in rollups).

If the sink is down, committed batches pile up in memory only up to
``max_pending_rows``; beyond that they are dropped from memory (they are on disk) and
the flusher later re-reads them from the journal files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.journal.files import (
    Position,
    delete_segments_before,
    read_checkpoint,
    read_pending,
    segment_numbers,
    write_checkpoint,
)
from tokenplane.metering.journal.journal import CommittedBatch
from tokenplane.metering.stores.base import LedgerSink

log = logging.getLogger(__name__)


async def write_with_checkpoint(
    sink: LedgerSink, writer_dir: Path, events: list[UsageEvent], end: Position
) -> int:
    inserted = await sink.write(events)
    await asyncio.to_thread(_checkpoint_and_trim, writer_dir, end)
    return inserted


def _checkpoint_and_trim(writer_dir: Path, end: Position) -> None:
    write_checkpoint(writer_dir, end)
    delete_segments_before(writer_dir, end.segment)


async def replay_writer_dir(
    sink: LedgerSink, writer_dir: Path, *, max_rows: int = 10_000, upto: Position | None = None
) -> tuple[int, int]:
    """Flush everything after the checkpoint; returns ``(events_read, rows_inserted)``.

    Reads one segment at a time, so memory stays bounded by the segment size. The
    caller must hold the writer's lock (or be its owner).
    """
    read = inserted = 0
    start = read_checkpoint(writer_dir)
    for number in segment_numbers(writer_dir):
        if number < start.segment:
            continue
        if upto is not None and number > upto.segment:
            break
        first = Position(number, start.offset if number == start.segment else 0)
        last = upto if upto is not None and number == upto.segment else Position(number, 2**62)
        records = await asyncio.to_thread(read_pending, writer_dir, first, last)
        for i in range(0, len(records), max_rows):
            chunk = records[i : i + max_rows]
            events = [ev for ev, _ in chunk]
            inserted += await write_with_checkpoint(sink, writer_dir, events, chunk[-1][1])
            read += len(events)
    return read, inserted


class Flusher:
    """Background task: committed journal batches -> sink, with checkpoints."""

    def __init__(
        self,
        writer_dir: Path,
        sink: LedgerSink,
        *,
        max_rows: int = 10_000,
        max_pending_rows: int = 200_000,
        retry_initial_s: float = 0.05,
        retry_max_s: float = 5.0,
        on_flush: Callable[[int, int], None] | None = None,
        min_interval_s: float = 0.0,
    ) -> None:
        self.writer_dir = writer_dir
        self.sink = sink
        self.max_rows = max_rows
        self.max_pending_rows = max_pending_rows
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self.on_flush = on_flush
        # Wait this long between flushes unless max_rows are pending: fewer, larger
        # transactions cost the gateway's process less CPU (and less GIL) per event.
        self.min_interval_s = min_interval_s
        self._pending: deque[CommittedBatch] = deque()
        self._pending_rows = 0
        self._mutex = threading.Lock()
        self._spilled_upto: Position | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._idle = True  # waiting for work: the next submit must wake the loop
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.flushed = 0
        self.inserted = 0
        self.errors = 0
        self.last_error: str | None = None
        self.last_flush_ts: float | None = None

    @property
    def pending_rows(self) -> int:
        return self._pending_rows

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name=f"flusher-{self.writer_dir.name}")

    def schedule_replay(self, upto: Position) -> None:
        """Re-read the journal from the checkpoint up to ``upto`` before anything else."""
        with self._mutex:
            self._pending.clear()
            self._pending_rows = 0
            current = self._spilled_upto
            self._spilled_upto = upto if current is None else max(current, upto)
        self._wake.set()

    def submit(self, batch: CommittedBatch) -> None:
        """Thread-safe: called by the journal's writer thread after each fsync.

        Wakes the flusher's loop only when the flusher waits for work, or when a full
        batch (``max_rows``) is pending: while it pauses between flushes (under load,
        nearly always) a commit costs no event-loop wake-up."""
        loop = self._loop
        with self._mutex:
            if self._pending_rows + len(batch.events) > self.max_pending_rows:
                # Too much backlog in memory: keep it on disk only, re-read it later.
                self._pending.clear()
                self._pending_rows = 0
                self._spilled_upto = batch.end
            elif self._spilled_upto is not None:
                self._spilled_upto = max(self._spilled_upto, batch.end)
            else:
                self._pending.append(batch)
                self._pending_rows += len(batch.events)
            wake = loop is not None and (self._idle or self._pending_rows >= self.max_rows)
            if wake:
                self._idle = False
        if wake and loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake.set)

    async def close(self) -> None:
        """Flush everything submitted so far, then stop (one retry round on failure)."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while await self._flush_once():
                pass
            if self._stopping:
                return
            if self.min_interval_s > 0:
                await self._pause()
            with self._mutex:  # nothing left: the next submit wakes the loop
                if self._pending_rows or self._spilled_upto is not None:
                    self._wake.set()
                else:
                    self._idle = True

    async def _pause(self) -> None:
        """Sleeps up to ``min_interval_s``; a full batch or ``close()`` ends it early."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.min_interval_s
        while not self._stopping and self._pending_rows < self.max_rows:
            left = deadline - loop.time()
            if left <= 0:
                return
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._wake.wait()
        if self._pending_rows or self._spilled_upto is not None or self._stopping:
            self._wake.set()

    def _take(self) -> tuple[list[UsageEvent], Position | None, Position | None]:
        with self._mutex:
            spilled, self._spilled_upto = self._spilled_upto, None
            events: list[UsageEvent] = []
            end: Position | None = None
            while self._pending and len(events) < self.max_rows:
                batch = self._pending.popleft()
                self._pending_rows -= len(batch.events)
                events.extend(batch.events)
                end = batch.end
            return events, end, spilled

    async def _flush_once(self) -> bool:
        events, end, spilled = self._take()
        if spilled is not None:
            upto = spilled
            result = await self._retrying(
                lambda: replay_writer_dir(self.sink, self.writer_dir, upto=upto)
            )
        elif end is not None:
            last = end
            result = await self._retrying(lambda: self._write(events, last))
        else:
            return False
        if result is None:
            return False
        self._account(*result)
        return True

    async def _write(self, events: list[UsageEvent], end: Position) -> tuple[int, int]:
        return len(events), await write_with_checkpoint(self.sink, self.writer_dir, events, end)

    def _account(self, flushed: int, inserted: int) -> None:
        self.flushed += flushed
        self.inserted += inserted
        self.last_flush_ts = time.time()
        if self.on_flush is not None:
            self.on_flush(flushed, inserted)

    async def _retrying(
        self, attempt: Callable[[], Awaitable[tuple[int, int]]]
    ) -> tuple[int, int] | None:
        """Run ``attempt`` until it succeeds; ``None`` if it fails while stopping."""
        delay = self.retry_initial_s
        while True:
            try:
                return await attempt()
            except Exception as exc:
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("ledger flush failed, will retry: %s", self.last_error)
                if self._stopping:
                    # Shutting down with the sink unavailable: the journal keeps the
                    # events and the next start replays them.
                    return None
                await asyncio.sleep(delay)  # back-off before retrying the sink
                delay = min(delay * 2, self.retry_max_s)
