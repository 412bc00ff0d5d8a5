"""``Meter``: the one object the gateway talks to for usage.

``record(event)`` prices the event (if a price book is set and the event carries no
price yet), appends it to this process's journal and returns a future that resolves
once the event is fsynced: the request path never touches a database. A background
flusher moves committed batches to the ledger sink.

``start()`` claims a writer id (an exclusive ``flock``; with no id given, the first
free of ``w0, w1, ...``, so ids stay stable per worker index), replays what its own
journal holds beyond the checkpoint, and adopts the journals of writers whose
process is gone. ``close()`` drains: everything recorded is flushed and fsynced.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.flusher import Flusher, replay_writer_dir
from tokenplane.metering.journal.files import Position, WriterLock, next_segment_number
from tokenplane.metering.journal.journal import (
    DEFAULT_SEGMENT_BYTES,
    Journal,
    JournalBusy,
    writer_dir_for,
)
from tokenplane.metering.pricing import PriceBook
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.deferred import DeferredSink
from tokenplane.metering.stores.open import open_sink
from tokenplane.periodic import Periodic

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MeterStats:
    writer_id: str
    journaled: int  # events appended
    committed: int  # events fsynced to the journal
    flushed: int  # events handed to the sink (inserted or already present)
    inserted: int  # rows the sink actually inserted
    recovered: int  # events replayed at start (own leftovers and adopted journals)
    lag: int  # committed but not yet flushed (approximate after a backlog replay)
    syncs: int
    sink_errors: int
    last_error: str | None
    last_flush_ts: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Meter:
    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        sink: LedgerSink | str | os.PathLike[str] | None = None,
        *,
        writer_id: str | None = None,
        prices: PriceBook | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        flush_max_rows: int = 10_000,
        max_pending_rows: int = 200_000,
        adopt_orphans: bool = True,
        max_writers: int = 256,
        adopt_interval_s: float | None = None,
        flush_interval_s: float = 0.0,
        claim_timeout_s: float = 30.0,
        sink_options: dict[str, Any] | None = None,
        on_flush: Callable[[int, int], None] | None = None,
        ack: str = "synced",
    ) -> None:
        self.data_dir = Path(data_dir)
        self._sink_arg = sink
        self._sink: LedgerSink | None = sink if isinstance(sink, LedgerSink) else None
        self._owns_sink = self._sink is None
        self._requested_id = writer_id
        self.prices = prices
        self.segment_bytes = segment_bytes
        self.flush_max_rows = flush_max_rows
        self.max_pending_rows = max_pending_rows
        self.adopt_on_start = adopt_orphans
        self.max_writers = max_writers
        self.adopt_interval_s = adopt_interval_s
        self.flush_interval_s = flush_interval_s
        self.claim_timeout_s = claim_timeout_s
        self.sink_options = dict(sink_options or {})
        self._adopter: Periodic | None = None
        self._unrecorded_prices: dict[str, PriceBook] = {}
        self.on_flush = on_flush
        self.ack = ack  # "written" or "synced": when record() counts as durable
        self.writer_id = ""
        self._lock: WriterLock | None = None
        self._journal: Journal | None = None
        self._flusher: Flusher | None = None
        self.recovered = 0

    @property
    def sink(self) -> LedgerSink:
        if self._sink is None:
            raise RuntimeError("meter not started")
        return self._sink

    async def start(self) -> None:
        """Claim a writer id, replay leftovers, start journal and flusher.

        If the ledger database is unreachable, the meter starts anyway: events are
        journaled, and the flusher replays the backlog once the database is back.
        """
        if self._sink is None:
            target = self._sink_arg
            if target is None or isinstance(target, LedgerSink):
                target = self.data_dir / "ledger.db"
            try:
                self._sink = await open_sink(target, **self.sink_options)
            except Exception as exc:
                log.warning("ledger unavailable at start, journaling only for now: %s", exc)
                self._sink = DeferredSink(target, **self.sink_options)
        try:
            lock = await self._claim_writer_id_patiently()
        except JournalBusy:
            if self._owns_sink:
                await self.sink.close()
                self._sink = None
            raise
        own_dir = lock.writer_dir
        backlog: Position | None = None
        try:
            read, _ = await replay_writer_dir(self.sink, own_dir, max_rows=self.flush_max_rows)
            self.recovered += read
            if self.adopt_on_start:
                await self.adopt_orphans()
        except Exception as exc:
            log.warning("ledger unavailable, replaying the journal later: %s", exc)
            # everything this writer left behind, up to (excluding) the new segment
            backlog = Position(next_segment_number(own_dir) - 1, 2**62)
        flusher = Flusher(
            own_dir,
            self.sink,
            max_rows=self.flush_max_rows,
            max_pending_rows=self.max_pending_rows,
            on_flush=self.on_flush,
            min_interval_s=self.flush_interval_s,
        )
        flusher.start()
        if self.prices is not None:
            await self.set_prices(self.prices)
        if backlog is not None:
            flusher.schedule_replay(backlog)
        journal = Journal(
            self.data_dir,
            self.writer_id,
            segment_bytes=self.segment_bytes,
            on_commit=flusher.submit,
            lock=lock,
            ack=self.ack,
        )
        journal.open()
        self._flusher, self._journal = flusher, journal
        if self.adopt_interval_s is not None:
            self._adopter = Periodic("tokenplane-adopter", self.adopt_interval_s,
                                     self._adopt_and_record, log=log,
                                     failure="adopting orphaned journals failed (the sink may "
                                             "be down; the journals wait on disk)")
            self._adopter.start()

    async def _adopt_and_record(self) -> None:
        """Pick up journals of workers that die while this one runs."""
        await self.adopt_orphans()
        await self._record_prices()

    async def _claim_writer_id_patiently(self) -> WriterLock:
        """A named writer id may be held for a moment by a sibling process that is
        adopting it as an orphan (it releases it once the replay is done): wait for
        it, up to ``claim_timeout_s``, before giving up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.claim_timeout_s if self._requested_id else 0.0)
        delay = 0.02
        while True:
            try:
                return self._claim_writer_id()
            except JournalBusy:
                if loop.time() >= deadline:
                    raise
            await asyncio.sleep(delay)  # the adopter holds the lock only while replaying
            delay = min(delay * 2, 0.5)

    def _claim_writer_id(self) -> WriterLock:
        if self._requested_id is not None:
            candidates = [self._requested_id]
        else:
            candidates = [f"w{i}" for i in range(self.max_writers)]
        for candidate in candidates:
            lock = WriterLock(writer_dir_for(self.data_dir, candidate))
            if lock.try_acquire():
                self.writer_id, self._lock = candidate, lock
                return lock
        raise JournalBusy(f"no free writer id under {self.data_dir} among {candidates[:3]}...")

    async def adopt_orphans(self) -> int:
        """Flush the journals of writers with no live process; returns events replayed."""
        root = self.data_dir / "journal"
        if not root.is_dir():
            return 0
        total = 0
        for entry in sorted(root.iterdir()):
            if not entry.is_dir() or entry.name == self.writer_id:
                continue
            lock = WriterLock(entry)
            if not lock.try_acquire():
                continue  # a live process owns it
            try:
                read, _ = await replay_writer_dir(self.sink, entry, max_rows=self.flush_max_rows)
                total += read
            finally:
                lock.release()
            if read:
                log.info("replayed %d usage events from the journal of %s (no live owner)",
                         read, entry.name)
        self.recovered += total
        return total

    async def set_prices(self, prices: PriceBook) -> None:
        """Price new events with ``prices``; events already recorded keep their cost.

        The table itself is stored in the ledger (``price_versions``) for audits; if
        the ledger is down, that is retried by later calls and by ``close()``.
        """
        self.prices = prices
        self._unrecorded_prices[prices.version] = prices
        await self._record_prices()

    async def _record_prices(self) -> None:
        for version, book in list(self._unrecorded_prices.items()):
            try:
                await self.sink.record_price_table(
                    version, book.currency, orjson.dumps(book.table())
                )
            except Exception as exc:
                log.warning("could not store price table %s yet: %s", version, exc)
                return
            del self._unrecorded_prices[version]

    def record(self, event: UsageEvent) -> asyncio.Future[None]:
        """Journal ``event``; await the result to know it is durable."""
        if self._journal is None:
            raise RuntimeError("meter not started")
        if self.prices is not None and not event.price_version:
            self.prices.price(event)
        return self._journal.append(event)

    async def close(self) -> None:
        """Drain: commit the journal, flush it to the sink, release the writer id."""
        if self._adopter is not None:
            await self._adopter.close()
            self._adopter = None
        if self._journal is not None:
            if self._journal.on_loop:
                self._journal.close()  # its last sync, here on the loop (at shutdown)
            else:
                await asyncio.to_thread(self._journal.close)
        if self._flusher is not None:
            await self._flusher.close()
        if self._unrecorded_prices and self._sink is not None:
            await self._record_prices()
        if self._lock is not None:
            self._lock.release()
        if self._sink is not None and self._owns_sink:
            await self._sink.close()

    def stats(self) -> MeterStats:
        journal, flusher = self._journal, self._flusher
        committed = journal.committed if journal else 0
        flushed = flusher.flushed if flusher else 0
        return MeterStats(
            writer_id=self.writer_id,
            journaled=journal.appended if journal else 0,
            committed=committed,
            flushed=flushed,
            inserted=flusher.inserted if flusher else 0,
            recovered=self.recovered,
            lag=max(0, committed - flushed),
            syncs=journal.syncs if journal else 0,
            sink_errors=flusher.errors if flusher else 0,
            last_error=flusher.last_error if flusher else None,
            last_flush_ts=flusher.last_flush_ts if flusher else None,
        )

    def __repr__(self) -> str:
        return f"Meter(data_dir={str(self.data_dir)!r}, writer_id={self.writer_id!r})"
