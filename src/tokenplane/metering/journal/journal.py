"""The usage journal: append, group commit, fsync, then acknowledge.

``append(event)`` is cheap and non-blocking on the event loop: it queues the event and
returns a future. One writer thread drains whatever has queued, writes it as one
batch of CRC-framed records, ``fdatasync``s once, and only then resolves every
waiter of the batch (group commit: the more load, the bigger the batches, the fewer
syncs per event). Each committed batch is also handed to ``on_commit`` (the
flusher), with the journal position just after it.

Where Linux native AIO can sync a file (``aio_sync.py``), and the journal is opened
on an event loop, there is no writer thread: ``append`` writes the record at once
(into the page cache) and the loop starts one ``fdatasync`` through AIO for everything
written since the last one; when the kernel signals it done, the loop acknowledges
that batch and starts the next. Same group commit, same order of ``on_commit``
batches, no thread hand-off on the way to the acknowledgement.

A journal never appends to a segment written before it opened: it starts a fresh
segment numbered above every one present, so a torn tail left by a crash stays the
tail of an old segment, where replay ignores it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenplane.metering.events import UsageEvent, encode_event
from tokenplane.metering.journal.aio_sync import AsyncSync, open_async_sync
from tokenplane.metering.journal.files import (
    Position,
    WriterLock,
    encode_record,
    fsync_dir,
    next_segment_number,
    segment_name,
)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
log = logging.getLogger(__name__)


class JournalBusy(RuntimeError):
    """Another live process owns this writer id."""


class JournalClosed(RuntimeError):
    """``append`` after ``close``."""


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    events: list[UsageEvent]
    end: Position  # journal position just after the batch's last record


_Waiter = tuple[UsageEvent, "asyncio.Future[None]"]
_STOP = object()


def writer_dir_for(data_dir: Path, writer_id: str) -> Path:
    if not writer_id or "/" in writer_id or writer_id.startswith("."):
        raise ValueError(f"invalid writer id {writer_id!r}")
    return data_dir / "journal" / writer_id


class Journal:
    """Append-only, group-committed journal owned by one process (one writer id)."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        writer_id: str,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        on_commit: Callable[[CommittedBatch], None] | None = None,
        lock: WriterLock | None = None,
        use_aio: bool = True,
        ack: str = "synced",
    ) -> None:
        if ack not in ("written", "synced"):
            raise ValueError(f"ack must be 'written' or 'synced', got {ack!r}")
        # "written": an append's future resolves once its record is written (in the page
        # cache: it survives the process); "synced": once it is fdatasynced
        self.ack_written = ack == "written"
        self.dir = writer_dir_for(Path(data_dir), writer_id)
        self.writer_id = writer_id
        self.segment_bytes = segment_bytes
        self.on_commit = on_commit
        self._lock = lock if lock is not None else WriterLock(self.dir)
        self._owns_lock = lock is None
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._fd = -1
        self._segment = 0
        self._offset = 0
        self._closed = False
        self._gate = threading.Lock()
        # Group commit: an append wakes the writer only when it is idle; while it
        # writes and syncs, appends gather here and it takes them all when done. So
        # an event waits for at most the sync in progress and its own, and under
        # load one wake-up and one sync serve many events.
        self._batch: list[_Waiter] = []
        self._busy = False  # the writer has a batch in hand (guarded by the gate)
        self.appended = 0
        self.committed = 0
        self.syncs = 0
        # loop mode (native AIO): records written but not yet synced, and the batch
        # whose sync is in flight with its end position
        self.use_aio = use_aio
        self._aio: AsyncSync | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unsynced: list[_Waiter] = []
        self._syncing: list[_Waiter] = []
        self._syncing_end = Position(0, 0)
        self._submit_failed = False  # warned once

    @property
    def on_loop(self) -> bool:
        """True when the journal runs on its event loop (no writer thread): ``close``
        must then be called from that loop's thread."""
        return self._aio is not None

    @property
    def position(self) -> Position:
        """Position after the last record written (with the writer thread, the last
        committed batch; on the loop, possibly a record whose sync is pending)."""
        return Position(self._segment, self._offset)

    def open(self) -> None:
        if not self._lock.try_acquire():
            raise JournalBusy(f"journal {self.dir} is owned by another live process")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._open_segment(next_segment_number(self.dir))
        if self.use_aio:
            self._open_on_loop()
            if self._aio is not None:
                return
        self._thread = threading.Thread(
            target=self._run, name=f"journal-{self.writer_id}", daemon=True
        )
        self._thread.start()

    def _open_on_loop(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to watch the syncs: the writer thread
        aio = open_async_sync(self._fd)
        if aio is None:
            return
        self._aio, self._loop = aio, loop
        loop.add_reader(aio.eventfd, self._synced)

    def append(self, event: UsageEvent) -> asyncio.Future[None]:
        """Queue ``event``; the future resolves once it is on disk: written to the file
        (``ack="written"``) or fsynced (``ack="synced"``)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if self._aio is not None:
            self._append_on_loop(event, fut)
            return fut
        with self._gate:  # nothing slips in behind the stop marker
            if self._closed or self._thread is None:
                raise JournalClosed("journal is not open")
            self.appended += 1
            self._batch.append((event, fut))
            self._put_batch()
        return fut

    def _put_batch(self) -> None:
        """Caller holds the gate."""
        if self._batch and not self._busy:
            batch, self._batch = self._batch, []
            self._busy = True
            self._queue.put(batch)

    def _take_more(self) -> list[_Waiter]:
        """Writer thread, after a commit: what queued meanwhile, or nothing (then the
        writer is idle again and the next append wakes it)."""
        with self._gate:
            batch, self._batch = self._batch, []
            self._busy = bool(batch)
            return batch

    # -- loop mode -----------------------------------------------------------------

    def _append_on_loop(self, event: UsageEvent, fut: asyncio.Future[None]) -> None:
        if self._closed:
            raise JournalClosed("journal is not open")
        self.appended += 1
        try:
            data = encode_record(encode_event(event))
        except (TypeError, ValueError) as exc:  # an unserialisable event fails alone
            fut.set_exception(exc)
            return
        try:
            self._write(data)
        except OSError as exc:  # disk full, I/O error: fail it, go on in a new segment
            fut.set_exception(exc)
            self._abandon_segment()
            return
        if self.ack_written:
            fut.set_result(None)  # written: the sync below still follows at once
        self._unsynced.append((event, fut))
        if self._aio is not None and not self._aio.in_flight:
            self._start_sync()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        written = 0
        while written < len(data):
            written += os.write(self._fd, view[written:])
        self._offset += len(data)

    def _start_sync(self) -> None:
        assert self._aio is not None
        self._syncing, self._unsynced = self._unsynced, []
        self._syncing_end = Position(self._segment, self._offset)
        try:
            self._aio.submit(self._fd)
        except OSError as exc:  # cannot start it asynchronously: sync here instead
            if not self._submit_failed:
                self._submit_failed = True
                log.warning("journal %s: AIO sync failed to start (%s); syncing on the "
                            "event loop instead", self.dir, exc)
            self._finish_sync(self._sync_here())

    def _sync_here(self) -> int:
        try:
            os.fdatasync(self._fd)
        except OSError as exc:
            return -(exc.errno or 5)
        return 0

    def _synced(self) -> None:
        """The loop's reader: the sync in flight is done."""
        if self._aio is None:
            return
        result = self._aio.reap()
        if result is not None:
            self._finish_sync(result)

    def _finish_sync(self, result: int) -> None:
        batch, self._syncing = self._syncing, []
        error: OSError | None = None
        if result < 0:  # what the segment holds is now unknown: fail what waits on it
            error = OSError(-result, os.strerror(-result))
            batch += self._unsynced
            self._unsynced = []
        elif batch:
            self._committed(batch, self._syncing_end)
        _settle([fut for _, fut in batch], error)
        if error is not None or self._offset >= self.segment_bytes:
            self._next_segment(error is not None)
        if self._unsynced and not self._closed:
            self._start_sync()

    def _committed(self, batch: list[_Waiter], end: Position) -> None:
        self.syncs += 1
        self.committed += len(batch)
        try:
            if self.on_commit is not None:
                self.on_commit(CommittedBatch([ev for ev, _ in batch], end))
        except Exception:  # the events are durable; a later replay flushes them
            log.exception("journal on_commit hook failed")

    def _next_segment(self, abandon: bool) -> None:
        """Rotation (or a new segment after a failed sync); what was written to the
        old one and not synced yet is synced first, here (once per segment)."""
        if not abandon and self._unsynced:
            batch, self._unsynced = self._unsynced, []
            result = self._sync_here()
            if result == 0:
                self._committed(batch, Position(self._segment, self._offset))
            _settle([fut for _, fut in batch],
                    None if result == 0 else OSError(-result, os.strerror(-result)))
        with contextlib.suppress(OSError):  # if that fails, keep this segment
            self._open_segment(self._segment + 1)

    def _close_on_loop(self) -> None:
        aio, self._aio = self._aio, None
        assert aio is not None and self._loop is not None
        self._loop.remove_reader(aio.eventfd)
        aio.close()  # waits for a sync in flight
        batch, self._syncing = self._syncing + self._unsynced, []
        self._unsynced = []
        result = self._sync_here()
        if result == 0 and batch:
            self._committed(batch, Position(self._segment, self._offset))
        _settle([fut for _, fut in batch],
                None if result == 0 else OSError(-result, os.strerror(-result)))

    def close(self) -> None:
        """Commit everything queued, stop the writer thread, release the lock (in
        loop mode, call it on the loop's thread)."""
        with self._gate:
            if self._closed:
                return
            self._closed = True
        if self._aio is not None:
            self._close_on_loop()
        with self._gate:
            if self._thread is not None:
                self._put_batch()
                self._queue.put(_STOP)
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1
        if self._owns_lock:
            self._lock.release()

    # -- writer thread -------------------------------------------------------------

    def _open_segment(self, number: int) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
        path = self.dir / segment_name(number)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        fsync_dir(self.dir)
        self._segment = number
        self._offset = 0

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            batch: list[_Waiter] = []
            if first is _STOP:
                stop = True
            else:
                batch.extend(first)  # type: ignore[arg-type]
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                else:
                    batch.extend(item)  # type: ignore[arg-type]
            while batch:
                self._commit(batch)
                batch = self._take_more()

    def _commit(self, batch: list[_Waiter]) -> None:
        good: list[_Waiter] = []
        parts: list[bytes] = []
        for waiter in batch:
            try:
                parts.append(encode_record(encode_event(waiter[0])))
            except (TypeError, ValueError) as exc:  # an unserialisable event fails alone
                _resolve([waiter], exc)
                continue
            good.append(waiter)
        if not good:
            return
        error: BaseException | None = None
        try:
            self._write(b"".join(parts))
            if self.ack_written:
                _resolve(good, None)  # written; the sync follows in this same turn
            os.fdatasync(self._fd)
        except OSError as exc:  # disk full, I/O error: fail the waiters, keep going
            error = exc
            self._abandon_segment()
        try:
            if error is None:
                self._committed(good, Position(self._segment, self._offset))
        finally:
            _resolve(good, error)
        if error is None and self._offset >= self.segment_bytes:
            with contextlib.suppress(OSError):  # if rotation fails, keep this segment
                self._open_segment(self._segment + 1)

    def _abandon_segment(self) -> None:
        """After a failed write the segment may end in garbage: continue in a new one."""
        # If even that fails, the next commit fails its waiters the same way.
        with contextlib.suppress(OSError):
            self._open_segment(self._segment + 1)


def _resolve(batch: list[_Waiter], error: BaseException | None) -> None:
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for _, fut in batch:
        by_loop.setdefault(fut.get_loop(), []).append(fut)
    for loop, futs in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
            loop.call_soon_threadsafe(_settle, futs, error)


def _settle(futs: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for fut in futs:
        if fut.done():
            continue
        if error is None:
            fut.set_result(None)
        else:
            fut.set_exception(error)
