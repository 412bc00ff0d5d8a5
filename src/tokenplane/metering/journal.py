"""The usage journal: append, group commit, fsync, then acknowledge.

``append(event)`` is cheap and non-blocking on the event loop: it queues the event and
returns a future. One writer thread drains whatever has queued, writes it as one
batch of CRC-framed records, ``fdatasync``s once, and only then resolves every
waiter of the batch (group commit: the more load, the bigger the batches, the fewer
syncs per event). Each committed batch is also handed to ``on_commit`` (the
flusher), with the journal position just after it.

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
from tokenplane.metering.journal_files import (
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
    ) -> None:
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

    @property
    def position(self) -> Position:
        """Position after the last committed batch (writer thread's view)."""
        return Position(self._segment, self._offset)

    def open(self) -> None:
        if not self._lock.try_acquire():
            raise JournalBusy(f"journal {self.dir} is owned by another live process")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._open_segment(next_segment_number(self.dir))
        self._thread = threading.Thread(
            target=self._run, name=f"journal-{self.writer_id}", daemon=True
        )
        self._thread.start()

    def append(self, event: UsageEvent) -> asyncio.Future[None]:
        """Queue ``event``; the future resolves once it is on disk (fsynced)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
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

    def close(self) -> None:
        """Commit everything queued, stop the writer thread, release the lock."""
        with self._gate:
            if self._closed:
                return
            self._closed = True
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
            data = b"".join(parts)
            view = memoryview(data)
            written = 0
            while written < len(data):
                written += os.write(self._fd, view[written:])
            os.fdatasync(self._fd)
            self._offset += len(data)
            self.syncs += 1
            self.committed += len(good)
        except OSError as exc:  # disk full, I/O error: fail the waiters, keep going
            error = exc
            self._abandon_segment()
        try:
            if error is None and self.on_commit is not None:
                end = Position(self._segment, self._offset)
                self.on_commit(CommittedBatch([ev for ev, _ in good], end))
        except Exception:  # the events are durable; a later replay flushes them
            log.exception("journal on_commit hook failed")
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
