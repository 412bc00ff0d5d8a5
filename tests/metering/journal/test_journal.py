from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.metering.factories import make_event
from tokenplane.metering.events import encode_event
from tokenplane.metering.journal.files import (
    HEADER,
    Position,
    encode_record,
    next_segment_number,
    read_pending,
    read_segment,
    segment_name,
    segment_numbers,
    write_checkpoint,
)
from tokenplane.metering.journal.journal import CommittedBatch, Journal, JournalBusy, JournalClosed


@pytest.fixture(params=[True, False], ids=["loop", "thread"])
def use_aio(request: pytest.FixtureRequest) -> bool:
    """Both ways a journal syncs: on its event loop through native AIO (where the
    kernel offers it) and with its writer thread."""
    return bool(request.param)


async def _fill(journal: Journal, start: int, count: int) -> None:
    await asyncio.gather(*(journal.append(make_event(i)) for i in range(start, start + count)))


async def test_group_commit_batches_fsyncs_and_keeps_order(tmp_path: Path, use_aio: bool) -> None:
    batches: list[CommittedBatch] = []
    journal = Journal(tmp_path, "w0", on_commit=batches.append, use_aio=use_aio)
    journal.open()
    await _fill(journal, 0, 500)
    journal.close()
    assert journal.committed == 500
    assert journal.syncs < 100  # 500 appends in one loop turn: a handful of batches
    assert sum(len(b.events) for b in batches) == 500
    assert [b.end for b in batches] == sorted(b.end for b in batches)
    seg = segment_numbers(journal.dir)[-1]
    assert batches[-1].end == Position(seg, (journal.dir / segment_name(seg)).stat().st_size)
    records = read_pending(journal.dir)
    assert [ev.request_id for ev, _ in records] == [f"req-{i}" for i in range(500)]


async def test_torn_tail_is_ignored_and_next_journal_starts_new_segment(
        tmp_path: Path, use_aio: bool) -> None:
    journal = Journal(tmp_path, "w0", use_aio=use_aio)
    journal.open()
    await _fill(journal, 0, 20)
    journal.close()
    seg = journal.dir / segment_name(segment_numbers(journal.dir)[-1])
    intact = seg.read_bytes()
    # a crash mid-write: a header promising more bytes than made it to disk
    seg.write_bytes(intact + HEADER.pack(500, 0) + b'{"request_id":"half')
    assert len(read_pending(journal.dir)) == 20

    again = Journal(tmp_path, "w0", use_aio=use_aio)
    again.open()
    await _fill(again, 20, 5)
    again.close()
    assert len(segment_numbers(journal.dir)) == 2  # the torn segment is never appended to
    ids = [ev.request_id for ev, _ in read_pending(journal.dir)]
    assert ids == [f"req-{i}" for i in range(25)]


async def test_corrupt_record_fails_crc_and_stops_that_segment(
        tmp_path: Path, use_aio: bool) -> None:
    journal = Journal(tmp_path, "w0", use_aio=use_aio)
    journal.open()
    await _fill(journal, 0, 3)
    journal.close()
    seg = journal.dir / segment_name(segment_numbers(journal.dir)[-1])
    data = bytearray(seg.read_bytes())
    data[-3] ^= 0x55  # flip bits in the last record's payload
    seg.write_bytes(bytes(data))
    assert [ev.request_id for ev, _ in read_pending(journal.dir)] == ["req-0", "req-1"]


async def test_segments_rotate_by_size(tmp_path: Path, use_aio: bool) -> None:
    journal = Journal(tmp_path, "w0", segment_bytes=2000, use_aio=use_aio)
    journal.open()
    for start in range(0, 100, 10):
        await _fill(journal, start, 10)
    journal.close()
    assert len(segment_numbers(journal.dir)) > 3
    assert len(read_pending(journal.dir)) == 100


async def test_writer_id_is_exclusive_and_append_after_close_fails(
        tmp_path: Path, use_aio: bool) -> None:
    first = Journal(tmp_path, "w0", use_aio=use_aio)
    first.open()
    with pytest.raises(JournalBusy):
        Journal(tmp_path, "w0", use_aio=use_aio).open()
    first.close()
    with pytest.raises(JournalClosed):
        first.append(make_event(1))
    second = Journal(tmp_path, "w0", use_aio=use_aio)  # the lock is released on close
    second.open()
    second.close()


def test_segment_numbers_never_reuse_a_checkpointed_one(tmp_path: Path) -> None:
    writer_dir = tmp_path / "journal" / "w0"
    writer_dir.mkdir(parents=True)
    assert next_segment_number(writer_dir) == 1
    write_checkpoint(writer_dir, Position(7, 123))  # all segments flushed and deleted
    assert next_segment_number(writer_dir) == 8
    (writer_dir / segment_name(9)).touch()
    assert next_segment_number(writer_dir) == 10


def test_invalid_writer_id(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Journal(tmp_path, "../escape")


@settings(max_examples=60, deadline=None)
@given(count=st.integers(1, 12), cut=st.integers(0, 10_000), noise=st.binary(max_size=40))
def test_any_truncation_reads_back_an_exact_prefix(count: int, cut: int, noise: bytes) -> None:
    events = [make_event(i, flags=["x"] * (i % 3)) for i in range(count)]
    records = [encode_record(encode_event(ev)) for ev in events]
    data = b"".join(records)
    kept = cut % (len(data) + 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "seg.log"
        path.write_bytes(data[:kept] + noise)  # a torn tail, then garbage
        got = [ev for ev, _ in read_segment(path)]
    whole, end = 0, 0
    for rec in records:
        end += len(rec)
        whole += end <= kept
    assert got == events[:whole]  # every complete record, and nothing made up
