"""The newest audit records that pass a filter, without reading the whole log.

Each worker's segments are read newest first, each one backwards in blocks from its
end, and reading stops once the log has given ``limit + 1`` matches and reached
records older than the last of them (or older than ``since``, or the oldest
segment). In each block the lines holding the JSON strings of the values asked for
(``AuditFilter.needles``) are found by a byte search for the rarest of them, and
only those are parsed; ``AuditFilter.accepts`` then decides exactly, as the full
scan does. Nothing here is trusted for integrity: the page shows what
the files hold, and ``audit verify`` (hash chain, signed checkpoints and head) is
what proves them.

Within one log a request record's ``ts`` is the gateway's clock when the request was
submitted, in order on one event loop, so file order is time order; ``SLACK_S``
keeps reading that much further back, so a small wall-clock step back does not
hide a record from the page.
"""

from __future__ import annotations

import heapq
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tokenplane.governance.audit.filters import AuditFilter
from tokenplane.governance.audit.multi import log_dirs
from tokenplane.governance.audit.segments import list_segments, segment_day

BLOCK = 256 * 1024
SLACK_S = 2.0
SAMPLE = 16 * 1024


def reverse_blocks(path: Path, block: int = BLOCK) -> Iterator[bytes]:
    """The file backwards, about ``block`` bytes at a time, each piece cut at line
    ends (whole lines, in file order within the piece). The file's size is taken
    once: a line appended past it is left out, and a last line still being written
    fails to parse and is skipped."""
    with path.open("rb") as f:
        pos = f.seek(0, os.SEEK_END)
        rest = b""
        while pos > 0:
            start = max(0, pos - block)
            f.seek(start)
            data = f.read(pos - start) + rest
            pos = start
            if start and b"\n" not in data:  # one line longer than the block so far
                rest = data
                continue
            cut = data.find(b"\n") + 1 if start else 0  # a line cut in two: finished
            rest = data[:cut]  # by the next piece
            if len(data) > cut:
                yield data[cut:]
        if rest:
            yield rest


def candidates(piece: bytes, needles: tuple[bytes, ...]) -> Iterator[bytes]:
    """The lines of ``piece`` holding every needle, last line first. The search runs
    on the needle rarest in the piece's first ``SAMPLE`` bytes (the first of them on
    a tie), with C-speed ``rfind``, so a filter that matches few records costs a byte
    search, not a loop over lines."""
    if not needles:
        for line in reversed(piece.split(b"\n")):
            if line.strip():
                yield line
        return
    rare = min(needles, key=lambda n: piece.count(n, 0, SAMPLE))
    others = [n for n in needles if n is not rare]
    at = piece.rfind(rare)
    while at >= 0:
        begin = piece.rfind(b"\n", 0, at) + 1
        end = piece.find(b"\n", at)
        line = piece[begin:] if end < 0 else piece[begin:end]
        if all(n in line for n in others):
            yield line
        at = piece.rfind(rare, 0, begin)


def _first_line(piece: bytes) -> bytes:
    end = piece.find(b"\n")
    return piece if end < 0 else piece[:end]


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _ts(rec: dict[str, Any] | None) -> float | None:
    ts = None if rec is None else rec.get("ts")
    return float(ts) if isinstance(ts, int | float) else None


def newest_in_log(directory: Path, wanted: AuditFilter, limit: int) -> list[dict[str, Any]]:
    """At least ``limit + 1`` of one log's newest matching records (or all of them), in
    the order read: newest first."""
    needles = wanted.needles()
    first_day = None if wanted.since is None else time.strftime(
        "%Y%m%d", time.gmtime(wanted.since - SLACK_S))
    last_day = None if wanted.until is None else time.strftime(
        "%Y%m%d", time.gmtime(wanted.until + SLACK_S))
    # reading stops below this ts: ``since`` (less the slack), then, once limit + 1
    # matches are in, the oldest of them (less the slack)
    stop = -math.inf if wanted.since is None else wanted.since - SLACK_S
    found: list[dict[str, Any]] = []
    for seg in reversed(list_segments(directory)):
        day = segment_day(seg)
        if (first_day is not None and day < first_day) or (
                last_day is not None and day > last_day):
            continue
        for piece in reverse_blocks(seg):
            for line in candidates(piece, needles):
                rec = _parse(line)
                ts = _ts(rec)
                if rec is None or ts is None:
                    continue
                if ts < stop:
                    return found
                if wanted.accepts(rec):
                    found.append(rec)
                    if len(found) == limit + 1:
                        stop = max(stop, min(float(r["ts"]) for r in found) - SLACK_S)
            oldest = _ts(_parse(_first_line(piece)))
            if oldest is not None and oldest < stop:
                return found
    return found


def _key(rec: dict[str, Any]) -> tuple[float, int]:
    seq = rec.get("seq")
    return float(rec["ts"]), seq if isinstance(seq, int) else 0


def newest_matching(root: Path, wanted: AuditFilter, limit: int
                    ) -> tuple[list[dict[str, Any]], bool]:
    """The ``limit`` newest matching records of every worker log under ``root``,
    newest first, and whether more matched: what sorting every match would give."""
    per_log = [sorted(newest_in_log(d, wanted, limit), key=_key, reverse=True)
               for d in log_dirs(root)]
    merged = list(heapq.merge(*per_log, key=_key, reverse=True))
    return merged[:limit], len(merged) > limit
