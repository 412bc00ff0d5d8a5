"""``ack``: when an append counts as durable. ``written``: once its record is in the
journal file (it survives the process); ``synced``: once it is fdatasynced. In both,
the sync still runs and commits the batch (the ledger flusher sees it after the sync)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from tests.metering.factories import make_event
from tokenplane.metering.journal.files import segment_name
from tokenplane.metering.journal.journal import CommittedBatch, Journal


def _size(journal: Journal) -> int:
    return (journal.dir / segment_name(journal.position.segment)).stat().st_size


async def test_thread_written_acknowledges_before_the_fsync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[CommittedBatch] = []
    loop = asyncio.get_running_loop()
    committed = asyncio.Event()

    def on_commit(batch: CommittedBatch) -> None:  # the writer thread, after the sync
        batches.append(batch)
        loop.call_soon_threadsafe(committed.set)

    journal = Journal(tmp_path, "w0", use_aio=False, ack="written", on_commit=on_commit)
    journal.open()
    release, real = threading.Event(), os.fdatasync

    def slow_sync(fd: int) -> None:
        if fd == journal._fd:
            release.wait(10)  # the disk is slow: the sync is still running
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_sync)
    try:
        await asyncio.wait_for(journal.append(make_event(1)), 5)  # acknowledged...
        assert _size(journal) > 0 and batches == []  # ...written, not yet committed
    finally:
        release.set()
    await asyncio.wait_for(committed.wait(), 5)
    assert [e.request_id for b in batches for e in b.events] == [make_event(1).request_id]
    journal.close()


async def test_thread_synced_waits_for_the_fsync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = Journal(tmp_path, "w0", use_aio=False, ack="synced")
    journal.open()
    entered, release, real = threading.Event(), threading.Event(), os.fdatasync

    def slow_sync(fd: int) -> None:
        if fd == journal._fd:
            entered.set()
            release.wait(10)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_sync)
    fut = journal.append(make_event(1))
    try:
        assert await asyncio.to_thread(entered.wait, 5)  # the writer is in the sync
        assert not fut.done()
    finally:
        release.set()
    await asyncio.wait_for(fut, 5)
    journal.close()


@pytest.mark.parametrize("ack", ["written", "synced"])
async def test_loop_mode_acknowledges_as_configured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ack: str) -> None:
    journal = Journal(tmp_path, "w0", use_aio=True, ack=ack)
    journal.open()
    if not journal.on_loop:
        journal.close()
        pytest.skip("no native AIO here: the writer thread (tested above) syncs")
    held: list[bool] = []
    monkeypatch.setattr(journal, "_start_sync", lambda: held.append(True))  # a sync pending
    fut = journal.append(make_event(1))
    await asyncio.sleep(0)
    assert held and _size(journal) > 0
    assert fut.done() == (ack == "written")
    monkeypatch.undo()
    journal.close()  # its last sync settles whatever still waits
    await asyncio.wait_for(fut, 5)


def test_an_unknown_ack_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ack"):
        Journal(tmp_path, "w0", ack="sometimes")
