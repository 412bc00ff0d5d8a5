from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.metering.factories import make_event
from tokenplane.metering.journal.files import WriterLock
from tokenplane.metering.journal.journal import Journal, JournalBusy
from tokenplane.metering.meter import Meter
from tokenplane.metering.pricing import PriceBook
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.open import open_sink


async def _count(sink: LedgerSink) -> int:
    rows = await sink.fetch("SELECT COUNT(*) AS n FROM usage_events")
    return int(rows[0]["n"])


async def _journal_only(data_dir: Path, writer_id: str, start: int, count: int) -> None:
    """Leave events in a journal without flushing them (as a process that died would)."""
    journal = Journal(data_dir, writer_id)
    journal.open()
    await asyncio.gather(*(journal.append(make_event(i)) for i in range(start, start + count)))
    journal.close()


async def test_close_drains_everything(tmp_path: Path, sink_target: str) -> None:
    meter = Meter(tmp_path, sink_target, flush_max_rows=64)
    await meter.start()
    await asyncio.gather(*(meter.record(make_event(i)) for i in range(1000)))
    await meter.close()
    stats = meter.stats()
    assert (stats.journaled, stats.committed, stats.flushed, stats.lag) == (1000, 1000, 1000, 0)
    sink = await open_sink(sink_target)
    try:
        assert await _count(sink) == 1000
    finally:
        await sink.close()


async def test_restart_replays_own_leftovers_once(tmp_path: Path) -> None:
    await _journal_only(tmp_path, "w0", 0, 120)
    meter = Meter(tmp_path)  # first free id: w0, whose journal holds 120 unflushed events
    await meter.start()
    assert meter.writer_id == "w0"
    assert meter.stats().recovered == 120
    assert await _count(meter.sink) == 120
    await meter.close()
    again = Meter(tmp_path)
    await again.start()
    assert again.stats().recovered == 0  # the checkpoint says everything is flushed
    await again.close()


async def test_adopts_dead_writers_but_not_live_ones(tmp_path: Path) -> None:
    await _journal_only(tmp_path, "w5", 0, 30)
    await _journal_only(tmp_path, "w6", 100, 40)
    live = WriterLock(tmp_path / "journal" / "w6")
    assert live.try_acquire()  # w6's owner is still alive
    meter = Meter(tmp_path, writer_id="w0")
    await meter.start()
    try:
        assert meter.stats().recovered == 30
        assert await _count(meter.sink) == 30
        live.release()  # w6's owner dies
        assert await meter.adopt_orphans() == 40
        assert await meter.adopt_orphans() == 0
        assert await _count(meter.sink) == 70
    finally:
        await meter.close()


async def test_backlog_beyond_memory_bound_is_reread_from_disk(tmp_path: Path) -> None:
    meter = Meter(tmp_path, max_pending_rows=50, flush_max_rows=40)
    await meter.start()
    for start in range(0, 2000, 250):
        await asyncio.gather(*(meter.record(make_event(i)) for i in range(start, start + 250)))
    await meter.close()
    assert meter.stats().flushed >= 2000
    sink = await open_sink(tmp_path / "ledger.db")
    try:
        assert await _count(sink) == 2000
        rows = await sink.fetch(
            "SELECT CAST(SUM(requests) AS BIGINT) AS n FROM usage_rollups WHERE grain = 'day'"
        )
        assert rows[0]["n"] == 2000
    finally:
        await sink.close()


async def test_price_change_never_rewrites_recorded_costs(tmp_path: Path) -> None:
    old = PriceBook({"currency": "USD", "models": {"gpt-x": {"input": "1", "output": "2"}}})
    new = PriceBook({"currency": "USD", "models": {"gpt-x": {"input": "3", "output": "5"}}})
    meter = Meter(tmp_path, prices=old)
    await meter.start()
    await asyncio.gather(*(meter.record(make_event(i)) for i in range(10)))
    await meter.set_prices(new)
    await asyncio.gather(*(meter.record(make_event(i)) for i in range(10, 20)))
    await meter.close()
    sink = await open_sink(tmp_path / "ledger.db")
    try:
        # the same events priced again under the new table are ignored by the ledger
        assert await sink.write([new.price(make_event(i)) for i in range(10)]) == 0
        rows = await sink.fetch(
            "SELECT price_version, COUNT(*) AS n, CAST(SUM(cost_micros) AS BIGINT) AS c "
            "FROM usage_events GROUP BY price_version ORDER BY c"
        )
        assert rows == [
            {"price_version": old.version, "n": 10, "c": 10 * (15 * 1 + 7 * 2)},
            {"price_version": new.version, "n": 10, "c": 10 * (15 * 3 + 7 * 5)},
        ]
        versions = await sink.fetch("SELECT version FROM price_versions")
        assert {r["version"] for r in versions} == {old.version, new.version}
    finally:
        await sink.close()


async def test_explicit_writer_id_in_use_is_refused(tmp_path: Path) -> None:
    first = Meter(tmp_path, writer_id="gw-1")
    await first.start()
    try:
        with pytest.raises(JournalBusy):
            await Meter(tmp_path, writer_id="gw-1", claim_timeout_s=0.2).start()
        second = Meter(tmp_path)  # no id given: takes the first free one
        await second.start()
        assert second.writer_id == "w0"
        await second.close()
    finally:
        await first.close()
