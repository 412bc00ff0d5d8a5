"""On-disk pieces of the usage journal: records, segments, checkpoints, writer locks.

Layout under ``<data_dir>/journal/<writer_id>/``::

    lock                 flock'ed by the live process that owns this writer id
    checkpoint.json      {"segment": n, "offset": b}: everything before is in the ledger
    seg-000000000001.log segments, numbered upwards, never appended to after a restart

A record is ``<u32 length><u32 crc32(payload)><payload>`` (little endian), the payload
one orjson-encoded ``UsageEvent``. A reader stops at the first record whose header or
checksum does not hold: a torn tail left by a crash is ignored, never misread.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from tokenplane.metering.events import UsageEvent, decode_event

HEADER = struct.Struct("<II")
MAX_RECORD = 16 * 1024 * 1024
SEGMENT_PREFIX = "seg-"
SEGMENT_SUFFIX = ".log"


def encode_record(payload: bytes) -> bytes:
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def segment_name(number: int) -> str:
    return f"{SEGMENT_PREFIX}{number:012d}{SEGMENT_SUFFIX}"


def segment_numbers(writer_dir: Path) -> list[int]:
    """Numbers of the segment files present, ascending."""
    out: list[int] = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(writer_dir):
            name = entry.name
            if name.startswith(SEGMENT_PREFIX) and name.endswith(SEGMENT_SUFFIX):
                digits = name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)]
                if digits.isdigit():
                    out.append(int(digits))
    out.sort()
    return out


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """A point in a writer's journal: byte ``offset`` within segment ``segment``."""

    segment: int
    offset: int


def read_segment(path: Path, start: int = 0) -> Iterator[tuple[UsageEvent, int]]:
    """Yield ``(event, end_offset)`` for each intact record from ``start``.

    Stops silently at a torn or corrupt record (the tail a crash can leave).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    pos = start
    size = len(data)
    while pos + HEADER.size <= size:
        length, crc = HEADER.unpack_from(data, pos)
        body_start = pos + HEADER.size
        end = body_start + length
        if length > MAX_RECORD or end > size:
            return
        payload = data[body_start:end]
        if zlib.crc32(payload) != crc:
            return
        try:
            event = decode_event(payload)
        except (ValueError, TypeError):
            return
        yield event, end
        pos = end


def read_checkpoint(writer_dir: Path) -> Position:
    """The flushed position; ``Position(0, 0)`` when none (or unreadable)."""
    try:
        raw = orjson.loads((writer_dir / "checkpoint.json").read_bytes())
        return Position(int(raw["segment"]), int(raw["offset"]))
    except (FileNotFoundError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        return Position(0, 0)


def write_checkpoint(writer_dir: Path, pos: Position) -> None:
    """Atomically replace the checkpoint (write temp, fsync, rename)."""
    tmp = writer_dir / "checkpoint.json.tmp"
    data = orjson.dumps({"segment": pos.segment, "offset": pos.offset})
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, writer_dir / "checkpoint.json")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def delete_segments_before(writer_dir: Path, segment: int) -> int:
    """Remove segment files numbered below ``segment`` (they are fully flushed)."""
    removed = 0
    for number in segment_numbers(writer_dir):
        if number >= segment:
            break
        with contextlib.suppress(FileNotFoundError):
            (writer_dir / segment_name(number)).unlink()
            removed += 1
    return removed


def next_segment_number(writer_dir: Path) -> int:
    """A number above every segment present and above the checkpoint's segment."""
    present = segment_numbers(writer_dir)
    highest = max(present[-1] if present else 0, read_checkpoint(writer_dir).segment)
    return highest + 1


class WriterLock:
    """An exclusive, non-blocking ``flock`` on ``<writer_dir>/lock``.

    The kernel drops it when the process dies, so a lock that can be taken marks a
    journal with no live owner. The lock file is never deleted (deleting it would let
    two processes lock two different inodes of the same name).
    """

    def __init__(self, writer_dir: Path) -> None:
        self.writer_dir = writer_dir
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.writer_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.writer_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def read_pending(
    writer_dir: Path, start: Position | None = None, upto: Position | None = None
) -> list[tuple[UsageEvent, Position]]:
    """Intact records after ``start`` (default: the checkpoint), not past ``upto``.

    Each comes with the journal position just after it.
    """
    begin = read_checkpoint(writer_dir) if start is None else start
    out: list[tuple[UsageEvent, Position]] = []
    for number in segment_numbers(writer_dir):
        if number < begin.segment:
            continue
        if upto is not None and number > upto.segment:
            break
        offset = begin.offset if number == begin.segment else 0
        for event, end in read_segment(writer_dir / segment_name(number), offset):
            if upto is not None and number == upto.segment and end > upto.offset:
                break
            out.append((event, Position(number, end)))
    return out
