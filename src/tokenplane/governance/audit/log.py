"""The append-only audit writer: hash chain, group commit, checkpoints, rotation."""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import orjson

from tokenplane.governance.audit.chain import (
    DIGEST_HEX,
    GENESIS,
    Keys,
    head_claim,
    seal,
)
from tokenplane.governance.audit.content import Retention, encrypt_content, redact_tree
from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.segments import (
    list_segments,
    read_head,
    segment_index,
    segment_name,
    write_head,
)
from tokenplane.governance.audit.signing import FORMAT, Signer, claim_of, head_signed

log = logging.getLogger("tokenplane.audit")
anchor_log = logging.getLogger("tokenplane.audit.anchor")


def _day(ts: float) -> str:
    return time.strftime("%Y%m%d", time.gmtime(ts))


DAY_S = 86400


class AuditLog:
    """Append-only JSONL audit records chained by SHA-256, in a directory of segments.

    Every record has ``seq``, ``ts``, ``prev_hash`` and ``hash``. After every
    ``checkpoint_every`` records, and at a flush once ``checkpoint_interval_s`` has
    passed since the last checkpoint, a checkpoint is added: it lists the hashes
    (cut to 128 bits) of the records since the previous checkpoint (that one
    included) and is signed with Ed25519 (key derived from ``key``), so a chain
    re-hashed after a change still shows which record no longer matches. Records
    are buffered and written in groups (``group_size``) or on ``flush()``; each
    flush re-signs ``HEAD.json`` (last seq and hash, and the hashes of the records
    after the last checkpoint) so truncation and changes of the tail are detectable.
    Segments rotate on a new UTC day or past ``max_bytes``. ``ts`` is always passed
    in by the caller.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        key: bytes,
        checkpoint_every: int = 100,
        *,
        checkpoint_interval_s: float = 5.0,
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
        self.keys = Keys.derive(key)  # content key, and HMAC for logs of the first format
        self.signer = Signer(key)
        self._verifier = self.signer.verifier(key)
        self.checkpoint_every = checkpoint_every
        self.checkpoint_interval_s = checkpoint_interval_s
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
        self._interval: list[str] = []  # digests since the last checkpoint (included)
        self._interval_first = 0  # the seq of the first of them
        self._checkpoint_ts: float | None = None  # when the current interval began
        self._anchored = -1  # the last checkpoint logged for external anchoring
        self._anchor_ts = -math.inf
        self._last_checkpoint: tuple[int, str, float] | None = None  # seq, hash, ts
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

    def checkpoint(self, ts: float, **extra: Any) -> int:
        """Append a signed checkpoint now; returns its seq."""
        seq = self._seq
        fields: dict[str, Any] = {
            "kind": "checkpoint", "v": FORMAT, "seq": seq, "ts": ts, **extra,
            "first": self._interval_first, "digests": self._interval,
            "signer": self.signer.signer,
        }
        fields["sig"] = self.signer.sign(claim_of(fields))
        self._interval = []
        self._interval_first = seq
        self._write(fields, ts)
        self._since_checkpoint = 0
        self._checkpoint_ts = ts
        self._last_checkpoint = (seq, self._prev, ts)
        return seq

    def flush(self, now: float | None = None) -> None:
        """Group commit: write the buffered records, then re-sign the head. With
        ``now``, first add a checkpoint if ``checkpoint_interval_s`` has passed since
        the last one and records were added since, and log the newest checkpoint for
        external anchoring (at most once per ``checkpoint_interval_s``)."""
        if now is not None:
            started = self._checkpoint_ts
            if (self._since_checkpoint and started is not None
                    and now - started >= self.checkpoint_interval_s):
                self.checkpoint(max(now, started))
        if self._buffer:
            self._commit()
        if self._head_dirty:
            self._sign_head()
        if now is not None:
            self._anchor(now)

    def _anchor(self, now: float) -> None:
        """One INFO line on ``tokenplane.audit.anchor`` naming the newest checkpoint:
        ship it off the host (syslog, a log store) and ``audit verify --anchors``
        proves the log still holds it (no rollback, no truncation before it)."""
        last = self._last_checkpoint
        if last is None or last[0] == self._anchored or now - self._anchor_ts < (
                self.checkpoint_interval_s):
            return
        self._anchored, self._anchor_ts = last[0], now
        anchor_log.info("audit anchor %s", orjson.dumps({
            "log": self.dir.name, "seq": last[0], "hash": last[1], "ts": last[2],
            "signer": self.signer.signer}).decode())

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
        removed = prune_log(self.dir, self.signer, self._verifier,
                            now - retention_days * 86400.0)
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
        self._interval.append(digest[:DIGEST_HEX])
        if self._checkpoint_ts is None:
            self._checkpoint_ts = ts
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
        head: dict[str, Any] = {
            "v": FORMAT,
            "seq": self._seq - 1,
            "hash": self._prev,
            "first_seq": self._first_seq,
            "first_prev_hash": self._first_prev,
            "tail_first": self._interval_first,
            "tail": self._interval,
            "signer": self.signer.signer,
        }
        head["sig"] = self.signer.sign(head_claim(head))
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
        self._interval, self._interval_first = [], 0
        self._since_checkpoint = 0
        self._checkpoint_ts = None
        head = read_head(self.dir)
        if head is not None and head_signed(head, self._verifier):
            self._first_seq = int(head["first_seq"])
            self._first_prev = str(head["first_prev_hash"])
            self._seq, self._prev = int(head["seq"]) + 1, str(head["hash"])
            self._interval_first = self._seq
        elif head is not None:
            log.warning("audit head %s is not signed by this key (was the key changed?): "
                        "the records already in this log will not verify with it",
                        self.dir / "HEAD.json")
        segments = list_segments(self.dir)
        if not segments:
            return
        last = segments[-1]
        self._seg_index = segment_index(last)
        self._seg_day = last.name.rsplit("-", 1)[1][:8]
        self._seg_size = last.stat().st_size
        self._roll = True  # never append into a segment written by an earlier process
        records = _tail_records(last)
        self._resume_interval(records)
        tail = records[-1] if records else None
        if tail is not None and int(tail["seq"]) >= self._seq:
            adopted = [self._seq, int(tail["seq"])]
            self._seq, self._prev = int(tail["seq"]) + 1, str(tail["hash"])
            self.checkpoint(float(tail["ts"]), adopted_unsigned=adopted)

    def _resume_interval(self, records: list[dict[str, Any]]) -> None:
        """The digests of the records since the last checkpoint, from the end of the
        last segment (those before the part read are still covered by the chain)."""
        start = next((i for i in range(len(records) - 1, -1, -1)
                      if records[i].get("kind") == "checkpoint"), 0)
        kept = records[start:]
        if kept:
            self._interval = [str(r["hash"])[:DIGEST_HEX] for r in kept]
            self._interval_first = int(kept[0]["seq"])
            self._since_checkpoint = len(kept) - 1


_TAIL_BYTES = 4 * 1024 * 1024


def _tail_records(path: Path) -> list[dict[str, Any]]:
    """The parsed records of the last ``_TAIL_BYTES`` of a segment, in order."""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        start = max(0, size - _TAIL_BYTES)
        f.seek(start)
        lines = f.read().splitlines()
    if start:
        lines = lines[1:]  # probably cut in the middle
    out = []
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("seq"), int) and "hash" in obj:
            out.append(obj)
    return out
