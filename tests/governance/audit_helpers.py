"""Shared helpers for the audit tests: build a log and rewrite its lines."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from tokenplane.governance.audit.chain import seal
from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.audit.segments import HEAD_NAME, list_segments

KEY = b"0123456789abcdef0123456789abcdef"
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def entry(i: int, tenant: str = "acme", verdict: str = "allow") -> AuditEntry:
    return AuditEntry(
        request_id=f"req-{i}",
        tenant=tenant,
        key_id=f"key-{i % 3}",
        principal="alice",
        model="qwen2.5-72b",
        backend="vllm-a",
        status=200,
        tokens={"input": 100 + i, "output": 20},
        limits={"tpm": 100_000},
        verdicts={"pii": [], "injection": 0.0},
        verdict=verdict,
        content={"messages": [{"role": "user", "content": f"hello {i}"}]},
    )


def build(path: Path, n: int, *, checkpoint_every: int = 5, step: float = 1.0) -> AuditLog:
    log = AuditLog(path, KEY, checkpoint_every=checkpoint_every, group_size=7)
    for i in range(n):
        log.append(entry(i), ts=T0 + i * step)
    log.close()
    return log


def lines(path: Path) -> list[bytes]:
    out: list[bytes] = []
    for seg in list_segments(path):
        out.extend(line for line in seg.read_bytes().splitlines(keepends=True) if line.strip())
    return out


def rewrite(path: Path, new_lines: list[bytes]) -> None:
    """Put ``new_lines`` into one segment (replacing all segments)."""
    segs = list_segments(path)
    for seg in segs[1:]:
        seg.unlink()
    segs[0].write_bytes(b"".join(new_lines))


def seq_of(line: bytes) -> int:
    return int(orjson.loads(line)["seq"])


def rehash_from(ls: list[bytes], start: int) -> list[bytes]:
    """What an attacker without the key can do after changing line ``start``: recompute
    every hash from there on and relink the chain (signatures are left as they are)."""
    out = list(ls[:start])
    prev = orjson.loads(out[-1])["hash"] if out else None
    for line in ls[start:]:
        rec = {k: v for k, v in orjson.loads(line).items() if k != "hash"}
        if prev is not None:
            rec["prev_hash"] = prev
        sealed, prev = seal(rec)
        out.append(sealed)
    return out


def replay_with_key(path: Path, key: bytes, change: Callable[[dict[str, Any]], None],
                    checkpoint_every: int) -> None:
    """What an attacker who holds a key can do: rewrite the whole log (``change``
    applied to each request record) with a writer of their own, re-signed throughout."""
    records = [orjson.loads(line) for line in lines(path)]
    for seg in list_segments(path):
        seg.unlink()
    (path / HEAD_NAME).unlink()
    log = AuditLog(path, key, checkpoint_every=checkpoint_every, retention="redacted",
                   redactor=lambda text: text)
    for rec in records:
        if rec["kind"] != "request":
            continue  # the writer adds its own checkpoints
        change(rec)
        fields = {k: v for k, v in rec.items() if k not in ("seq", "ts", "prev_hash", "hash")}
        log.append(fields, ts=rec["ts"])
    log.close()


def newest(records: Iterator[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], bool]:
    """The reference the newest-first search is held to: every matching record
    sorted, the ``limit`` newest first, and whether more matched."""
    everything = sorted(records, key=lambda r: float(r["ts"]), reverse=True)
    return everything[:limit], len(everything) > limit
