"""Search and export across the audit directories of several gateway workers
(``<data_dir>/audit/<worker>/``, one chain each)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tokenplane.governance.audit.filters import AuditFilter
from tokenplane.governance.audit.segments import iter_records

# unscreened: the request ended before governance screened it (bad input, an unknown
# model, a wrong content type), so governance decided nothing about it
VERDICTS = ("allow", "flag", "block", "unscreened")


def log_dirs(root: Path) -> list[Path]:
    """The worker directories under ``root`` (or ``root`` itself when it holds a log)."""
    if (root / "HEAD.json").exists():
        return [root]
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir() if d.is_dir())


def _day(ts: float | None) -> str | None:
    return None if ts is None else time.strftime("%Y%m%d", time.gmtime(ts))


def matching(
    root: Path, *, tenant: str | None, key_id: str | None = None, since: float | None = None,
    until: float | None = None, verdict: str | None = None, requests_only: bool = True,
) -> Iterator[dict[str, Any]]:
    """Records of every worker directory that pass the filters. ``tenant`` None means
    every tenant: only for an operator (an admin key, the CLI)."""
    wanted = AuditFilter(tenant=tenant, key_id=key_id, since=since, until=until,
                         verdict=verdict, requests_only=requests_only)
    for d in log_dirs(root):
        for rec in iter_records(d, _day(since), _day(until)):
            if wanted.accepts(rec):
                yield rec


def export(root: Path, out: Path, *, tenant: str | None = None, since: float | None = None,
           until: float | None = None) -> int:
    """Write matching records with their hashes (and, for an operator export,
    checkpoints) to one JSONL file; returns the count."""
    n = 0
    with out.open("wb") as f:
        for rec in matching(root, tenant=tenant, since=since, until=until,
                            requests_only=tenant is not None):
            f.write(orjson.dumps(rec) + b"\n")
            n += 1
    return n
