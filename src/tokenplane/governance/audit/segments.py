"""Audit segment files on disk (``audit-000001-20260101.jsonl``) and the signed head."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

HEAD_NAME = "HEAD.json"
PREFIX = "audit-"
SUFFIX = ".jsonl"


def segment_name(index: int, day: str) -> str:
    return f"{PREFIX}{index:06d}-{day}{SUFFIX}"


def segment_index(path: Path) -> int:
    return int(path.name[len(PREFIX) : len(PREFIX) + 6])


def list_segments(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(
        p for p in directory.iterdir() if p.name.startswith(PREFIX) and p.name.endswith(SUFFIX)
    )


@dataclass(frozen=True, slots=True)
class RawRecord:
    segment: Path
    line_no: int
    data: bytes


def iter_raw(directory: Path) -> Iterator[RawRecord]:
    """Every non-empty line of every segment, in order."""
    for seg in list_segments(directory):
        with seg.open("rb") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    yield RawRecord(seg, n, line)


def segment_day(path: Path) -> str:
    """The UTC day (YYYYMMDD) of every record in the segment."""
    return path.name[len(PREFIX) + 7 : len(PREFIX) + 15]


def iter_records(
    directory: Path, first_day: str | None = None, last_day: str | None = None
) -> Iterator[dict[str, Any]]:
    """Parsed records in order; unreadable lines are skipped (verify reports them).

    ``first_day`` / ``last_day`` (YYYYMMDD) skip whole segments outside the range.
    """
    for seg in list_segments(directory):
        day = segment_day(seg)
        if (first_day is not None and day < first_day) or (last_day is not None and day > last_day):
            continue
        yield from _records_of(seg)


def _records_of(seg: Path) -> Iterator[dict[str, Any]]:
    with seg.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                yield obj


def read_head(directory: Path) -> dict[str, Any] | None:
    path = directory / HEAD_NAME
    try:
        obj = orjson.loads(path.read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def write_head(directory: Path, head: dict[str, Any]) -> None:
    """Atomic replace, so a crash leaves the old head or the new one."""
    tmp = directory / (HEAD_NAME + ".tmp")
    tmp.write_bytes(orjson.dumps(head))
    os.replace(tmp, directory / HEAD_NAME)
