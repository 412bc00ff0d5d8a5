"""The journal on its event loop (native AIO syncs): it is used where the kernel offers
it, acknowledges only after the sync, and handles a sync that fails or cannot start."""

from __future__ import annotations

import asyncio
import errno
import os
import sys
from pathlib import Path

import pytest

from tests.metering.factories import make_event
from tokenplane.metering.journal import aio_sync
from tokenplane.metering.journal.files import read_pending, segment_numbers
from tokenplane.metering.journal.journal import CommittedBatch, Journal


@pytest.fixture
def aio_available(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "probe", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        aio = aio_sync.open_async_sync(fd)
    finally:
        os.close(fd)
    if aio is None:
        if sys.platform == "linux" and os.environ.get("CI") == "true":
            pytest.fail("native AIO syncs are not available on this CI machine")
        pytest.skip("native AIO syncs are not available here (the writer thread is used)")
    aio.close()


async def test_loop_mode_acknowledges_after_the_sync(tmp_path: Path,
                                                      aio_available: None) -> None:
    batches: list[CommittedBatch] = []
    journal = Journal(tmp_path, "w0", on_commit=batches.append)
    journal.open()
    assert journal.on_loop
    futs = [journal.append(make_event(i)) for i in range(50)]
    assert not any(f.done() for f in futs)  # nothing is acknowledged before a sync
    assert len(read_pending(journal.dir)) == 50  # yet every record is written at once
    await asyncio.gather(*futs)
    assert journal.committed == 50 and journal.syncs == 2  # the first, then the rest
    assert [len(b.events) for b in batches] == [1, 49]
    journal.close()
    assert [ev.request_id for ev, _ in read_pending(journal.dir)] == [
        f"req-{i}" for i in range(50)]


async def test_a_sync_that_cannot_start_runs_in_place(
        tmp_path: Path, aio_available: None, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = Journal(tmp_path, "w0")
    journal.open()

    def refuse(self: aio_sync.AsyncSync, fd: int) -> None:
        raise OSError(errno.EAGAIN, "io_submit failed")

    monkeypatch.setattr(aio_sync.AsyncSync, "submit", refuse)
    await asyncio.gather(*(journal.append(make_event(i)) for i in range(5)))
    assert journal.committed == 5
    journal.close()
    assert len(read_pending(journal.dir)) == 5


async def test_a_failed_sync_fails_its_waiters_and_the_journal_goes_on(
        tmp_path: Path, aio_available: None, monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[CommittedBatch] = []
    journal = Journal(tmp_path, "w0", on_commit=batches.append)
    journal.open()
    before = len(segment_numbers(journal.dir))
    reap = aio_sync.AsyncSync.reap
    failures = [-errno.EIO]

    def failing_reap(self: aio_sync.AsyncSync) -> int | None:
        got = reap(self)
        return failures.pop() if got is not None and failures else got

    monkeypatch.setattr(aio_sync.AsyncSync, "reap", failing_reap)
    first = journal.append(make_event(0))
    more = [journal.append(make_event(i)) for i in range(1, 4)]
    with pytest.raises(OSError) as info:
        await first
    assert info.value.errno == errno.EIO
    for fut in more:  # written to the same segment before the failure was known
        with pytest.raises(OSError):
            await fut
    assert len(segment_numbers(journal.dir)) == before + 1  # it went on in a new segment
    await journal.append(make_event(9))  # durable again
    journal.close()
    assert [ev.request_id for b in batches for ev in b.events] == ["req-9"]


async def test_close_syncs_what_was_written_and_acknowledges_it(
        tmp_path: Path, aio_available: None) -> None:
    journal = Journal(tmp_path, "w0")
    journal.open()
    futs = [journal.append(make_event(i)) for i in range(10)]
    journal.close()  # on the loop's thread, with a sync in flight
    assert all(f.done() and f.exception() is None for f in futs)
    assert journal.committed == 10
    assert len(read_pending(journal.dir)) == 10
