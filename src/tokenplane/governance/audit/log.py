"""The append-only audit writer: hash chain, group commit, checkpoints, rotation."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import orjson

from tokenplane.governance.audit.chain import GENESIS, Keys, checkpoint_claim, head_claim, seal
from tokenplane.governance.audit.content import Retention, encrypt_content, redact_tree
from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.segments import (
    list_segments,
    read_head,
    segment_index,
    segment_name,
    write_head,
)


def _day(ts: float) -> str:
    return time.strftime("%Y%m%d", time.gmtime(ts))


DAY_S = 86400


class AuditLog:
    """Append-only JSONL audit records chained by SHA-256, in a directory of segments.

    Every record has ``seq``, ``ts``, ``prev_hash`` and ``hash``. Every
    ``checkpoint_every`` records a checkpoint record signed with HMAC-SHA256
    (key derived from ``key``) is added. Records are buffered and written in
    groups (``group_size``) or on ``flush()``; each flush re-signs ``HEAD.json``
    (last seq and hash) so truncation is detectable. Segments rotate on a new
    UTC day or past ``max_bytes``. ``ts`` is always passed in by the caller.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        key: bytes,
        checkpoint_every: int = 1000,
        *,
        retention: Retention | str = Retention.REDACTED,
        redactor: Callable[[str], str] | None = None,
        group_size: int = 512,
        max_bytes: int = 256 * 1024 * 1024,
        fsync: bool = False,
    ) -> None:
        if checkpoint_every < 1:
            raise ValueError("checkpoint_every must be >= 1")
        self.dir = Path(path)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.keys = Keys.derive(key)
        self.checkpoint_every = checkpoint_every
        self.retention = Retention(retention)
        if self.retention is Retention.REDACTED and redactor is None:
            from tokenplane.governance.analyzer import Analyzer
            from tokenplane.governance.pii_policy import redact

            analyzer = Analyzer()

            def redactor(text: str) -> str:
                # No built-in entity is shorter than 6 characters (a@b.cn).
                return text if len(text) < 6 else redact(text, analyzer)

        self._redactor = redactor
        self.group_size = group_size
        self.max_bytes = max_bytes
        self.fsync = fsync
        self._buffer: list[bytes] = []
        self._file: IO[bytes] | None = None
        self._seg_index = 0
        self._seg_day = ""
        self._seg_size = 0
        self._since_checkpoint = 0
        self._first_seq = 0
        self._first_prev = GENESIS
        self._seq = 0
        self._prev = GENESIS
        self._buffered = 0
        self._pending_day = ""
        self._roll = False
        self._head_dirty = False
        self._day_span = (0, 0, "")  # [start, end) of a UTC day (whole seconds), its name
        self._resume()

    # -- public -----------------------------------------------------------

    @property
    def next_seq(self) -> int:
        return self._seq

    def append(self, entry: AuditEntry | Mapping[str, Any], ts: float) -> int:
        """Add one record; returns its seq. Written at the next group commit."""
        fields = entry.to_fields() if isinstance(entry, AuditEntry) else dict(entry)
        seq = self._seq
        if "content" in fields:
            content = self._retain(fields.pop("content"), seq)
            if content is not None:
                fields["content"] = content
        self._write(fields, ts)
        self._since_checkpoint += 1
        if self._since_checkpoint >= self.checkpoint_every:
            self.checkpoint(ts)
        return seq

    def checkpoint(self, ts: float) -> int:
        """Append a signed checkpoint now; returns its seq."""
        seq = self._seq
        mac = self.keys.sign(checkpoint_claim(seq, ts, self._prev))
        fields = {"kind": "checkpoint", "mac": mac}
        self._write(fields, ts)
        self._since_checkpoint = 0
        return seq

    def flush(self) -> None:
        """Group commit: write the buffered records, then re-sign the head."""
        if self._buffer:
            self._commit()
        if self._head_dirty:
            self._sign_head()

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prune(self, now: float, retention_days: float = 180.0) -> int:
        """Drop records older than the retention period, up to a checkpoint. Returns
        the number of records removed."""
        from tokenplane.governance.audit.prune import prune_log

        self.close()
        removed = prune_log(self.dir, self.keys, now - retention_days * 86400.0)
        self._resume()
        return removed

    # -- internals ----------------------------------------------------------

    def _retain(self, content: Any, seq: int) -> Any:
        if self.retention is Retention.NONE:
            return None
        if self.retention is Retention.FULL:
            return encrypt_content(content, self.keys.content, seq)
        assert self._redactor is not None
        return redact_tree(content, self._redactor)

    def _day_of(self, ts: float) -> str:
        """``_day(ts)``, remembered for the rest of that day (gmtime floors ``ts`` to a
        whole second; POSIX days are 86400 of them)."""
        start, end, day = self._day_span
        if not start <= ts < end:
            start = math.floor(ts) // DAY_S * DAY_S
            day = _day(ts)
            self._day_span = (start, start + DAY_S, day)
        return day

    def _write(self, fields: dict[str, Any], ts: float) -> None:
        """``fields`` (a dict of the caller's own, completed here) sealed into the chain."""
        day = self._day_of(ts)
        if day != self._pending_day:
            if self._buffer:
                self._commit()
            self._pending_day = day
        fields["seq"] = self._seq
        fields["ts"] = ts
        fields["prev_hash"] = self._prev
        line, digest = seal(fields)
        if self._seg_size + self._buffered + len(line) > self.max_bytes and (
            self._seg_size or self._buffered
        ):
            self._commit()
            self._roll = True
        self._buffer.append(line)
        self._buffered += len(line)
        self._prev = digest
        self._seq += 1
        self._head_dirty = True
        if len(self._buffer) >= self.group_size:
            self._commit()

    def _commit(self) -> None:
        f = self._segment_for(self._pending_day)
        data = b"".join(self._buffer)
        f.write(data)
        f.flush()
        if self.fsync:
            os.fsync(f.fileno())
        self._seg_size += len(data)
        self._buffer.clear()
        self._buffered = 0
        self._sign_head()

    def _segment_for(self, day: str) -> IO[bytes]:
        if self._file is not None and day == self._seg_day and not self._roll:
            return self._file
        if self._file is not None:
            self._file.close()
        self._seg_index += 1
        self._seg_day = day
        self._roll = False
        self._file = (self.dir / segment_name(self._seg_index, day)).open("ab")
        self._seg_size = 0
        return self._file

    def _sign_head(self) -> None:
        head = {
            "seq": self._seq - 1,
            "hash": self._prev,
            "first_seq": self._first_seq,
            "first_prev_hash": self._first_prev,
        }
        head["mac"] = self.keys.sign(head_claim(head))
        write_head(self.dir, head)
        self._head_dirty = False

    def _resume(self) -> None:
        """Continue an existing log: next seq and hash from the signed head and the
        last segment. Records past a stale head (a crash between a write and the head
        update) are kept, and a checkpoint naming them (``adopted_unsigned``) is
        appended, so an auditor sees which records were signed only afterwards."""
        self._seq = 0
        self._prev = GENESIS
        self._buffered = 0
        self._pending_day = ""
        self._roll = False
        self._head_dirty = False
        head = read_head(self.dir)
        if head is not None and self.keys.check(head_claim(head), head.get("mac")):
            self._first_seq = int(head["first_seq"])
            self._first_prev = str(head["first_prev_hash"])
            self._seq, self._prev = int(head["seq"]) + 1, str(head["hash"])
        segments = list_segments(self.dir)
        if not segments:
            return
        last = segments[-1]
        self._seg_index = segment_index(last)
        self._seg_day = last.name.rsplit("-", 1)[1][:8]
        self._seg_size = last.stat().st_size
        self._roll = True  # never append into a segment written by an earlier process
        tail = _last_record(last)
        if tail is not None and int(tail["seq"]) >= self._seq:
            adopted = [self._seq, int(tail["seq"])]
            self._seq, self._prev = int(tail["seq"]) + 1, str(tail["hash"])
            ts = float(tail["ts"])
            mac = self.keys.sign(checkpoint_claim(self._seq, ts, self._prev))
            self._write({"kind": "checkpoint", "mac": mac, "adopted_unsigned": adopted}, ts)
            self._since_checkpoint = 0


_TAIL_BYTES = 4 * 1024 * 1024


def _last_record(path: Path) -> dict[str, Any] | None:
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - _TAIL_BYTES))
        lines = [line for line in f.read().splitlines() if line.strip()]
    for line in reversed(lines):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "seq" in obj and "hash" in obj:
            return obj
    return None
