"""Search and export audit records (tenant-scoped search for the admin API)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import orjson

from tokenplane.governance.audit.segments import iter_records


def _day(ts: float | None) -> str | None:
    return None if ts is None else time.strftime("%Y%m%d", time.gmtime(ts))


def _in_window(rec: dict[str, Any], since: float | None, until: float | None) -> bool:
    ts = rec.get("ts")
    if not isinstance(ts, int | float):
        return False
    return (since is None or ts >= since) and (until is None or ts < until)


def search(
    path: str | os.PathLike[str],
    *,
    tenant: str,
    key_id: str | None = None,
    since: float | None = None,
    until: float | None = None,
    verdict: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Request records of one tenant (required), filtered by key, time and verdict."""
    out: list[dict[str, Any]] = []
    for rec in iter_records(Path(path), _day(since), _day(until)):
        if rec.get("kind") != "request" or rec.get("tenant") != tenant:
            continue
        if key_id is not None and rec.get("key_id") != key_id:
            continue
        if verdict is not None and rec.get("verdict") != verdict:
            continue
        if not _in_window(rec, since, until):
            continue
        out.append(rec)
        if limit is not None and len(out) >= limit:
            break
    return out


def export_jsonl(
    path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    tenant: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> int:
    """Write records (with their hashes, for independent checking) to one JSONL file.

    ``tenant`` None exports everything, checkpoints included (an operator export).
    Returns the number of records written.
    """
    n = 0
    with Path(out_path).open("wb") as f:
        for rec in iter_records(Path(path), _day(since), _day(until)):
            if tenant is not None and (rec.get("kind") != "request" or rec.get("tenant") != tenant):
                continue
            if not _in_window(rec, since, until):
                continue
            f.write(orjson.dumps(rec) + b"\n")
            n += 1
    return n
