"""Replays from a checkpoint, and a ledger database that is down when the meter starts."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.metering.factories import make_event
from tokenplane.metering.flusher import replay_writer_dir
from tokenplane.metering.journal.files import read_pending, segment_numbers, write_checkpoint
from tokenplane.metering.journal.journal import Journal
from tokenplane.metering.meter import Meter
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.open import open_sink


async def _journal_only(data_dir: Path, count: int, segment_bytes: int = 1 << 26) -> Path:
    journal = Journal(data_dir, "w0", segment_bytes=segment_bytes)
    journal.open()
    for start in range(0, count, 10):
        await asyncio.gather(*(journal.append(make_event(i)) for i in range(start, start + 10)))
    journal.close()
    return journal.dir


async def _ids(sink: LedgerSink) -> list[str]:
    rows = await sink.fetch("SELECT request_id FROM usage_events")
    return sorted((r["request_id"] for r in rows), key=lambda x: int(x.split("-")[1]))


async def test_replay_resumes_mid_segment_and_trims_flushed_segments(tmp_path: Path) -> None:
    writer_dir = await _journal_only(tmp_path, 100, segment_bytes=3000)
    assert len(segment_numbers(writer_dir)) > 3
    records = read_pending(writer_dir)
    write_checkpoint(writer_dir, records[29][1])  # the first 30 are already in the ledger
    sink = await open_sink(tmp_path / "ledger.db")
    try:
        read, inserted = await replay_writer_dir(sink, writer_dir, max_rows=16)
        assert (read, inserted) == (70, 70)
        assert await _ids(sink) == [f"req-{i}" for i in range(30, 100)]
        assert segment_numbers(writer_dir)[0] == records[-1][1].segment  # older ones deleted
        assert await replay_writer_dir(sink, writer_dir) == (0, 0)
    finally:
        await sink.close()


async def test_meter_starts_and_journals_while_the_ledger_is_down(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await _journal_only(data, 30)  # a previous life left 30 unflushed events
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the ledger's directory should be")
    target = blocker / "ledger.db"
    flushed = 0
    all_in = asyncio.Event()

    def on_flush(count: int, inserted: int) -> None:
        nonlocal flushed
        flushed += count
        if flushed >= 50:
            all_in.set()

    meter = Meter(data, str(target), on_flush=on_flush)
    await meter.start()
    assert meter.writer_id == "w0" and meter.stats().recovered == 0
    await asyncio.gather(*(meter.record(make_event(i)) for i in range(30, 50)))
    blocker.unlink()  # the database comes back
    await all_in.wait()
    await meter.close()
    sink = await open_sink(target)
    try:
        assert await _ids(sink) == [f"req-{i}" for i in range(50)]
    finally:
        await sink.close()


async def test_close_with_the_ledger_down_keeps_events_for_the_next_start(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "blocked"
    blocker.write_text("x")
    target = blocker / "ledger.db"
    meter = Meter(tmp_path / "data", str(target))
    await meter.start()
    await asyncio.gather(*(meter.record(make_event(i)) for i in range(10)))
    await meter.close()  # cannot flush: the events stay in the journal
    assert meter.stats().flushed == 0
    blocker.unlink()
    again = Meter(tmp_path / "data", str(target))
    await again.start()
    assert again.stats().recovered == 10
    await again.close()
