"""Check an audit log: chain, order, signatures, head; name the first bad record."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson

from tokenplane.governance.audit.chain import (
    GENESIS,
    Keys,
    checkpoint_claim,
    head_claim,
    record_hash,
)
from tokenplane.governance.audit.segments import iter_raw, read_head


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    first_bad_seq: int | None = None
    reason: str = ""
    records: int = 0
    checkpoints: int = 0


class _Bad(Exception):
    def __init__(self, seq: int | None, reason: str) -> None:
        super().__init__(reason)
        self.seq = seq
        self.reason = reason


def _parsed(directory: Path) -> Iterator[tuple[dict[str, Any] | None, str]]:
    for raw in iter_raw(directory):
        where = f"{raw.segment.name}:{raw.line_no}"
        try:
            obj = orjson.loads(raw.data)
        except orjson.JSONDecodeError:
            yield None, where
            continue
        ok = isinstance(obj, dict) and isinstance(obj.get("seq"), int) and "hash" in obj
        yield (obj if ok else None), where


def verify(path: str | os.PathLike[str], key: bytes) -> VerifyResult:
    """Verify every segment in ``path`` against the chain, checkpoints and signed head."""
    directory = Path(path)
    keys = Keys.derive(key)
    head = read_head(directory)
    if head is None or not keys.check(head_claim(head), head.get("mac")):
        problem = (
            "head file HEAD.json is missing or unreadable"
            if head is None
            else "head file signature is invalid (wrong key or edited)"
        )
        return _without_head(directory, keys, problem)
    try:
        records, checkpoints, last = _walk(directory, keys, head)
    except _Bad as bad:
        return VerifyResult(False, bad.seq, bad.reason)
    head_seq = int(head["seq"])
    if last is None:
        if head_seq >= int(head["first_seq"]):
            return VerifyResult(False, int(head["first_seq"]), "all records are missing")
        return VerifyResult(True, records=0)
    last_seq = int(last["seq"])
    if last_seq < head_seq:
        return VerifyResult(
            False,
            last_seq + 1,
            f"log truncated: records {last_seq + 1}..{head_seq} are missing (head says {head_seq})",
            records,
            checkpoints,
        )
    if last_seq > head_seq:
        return VerifyResult(
            False, head_seq + 1, f"records after seq {head_seq} are not covered by the signed head"
        )
    if last["hash"] != head["hash"]:
        return VerifyResult(False, last_seq, f"record {last_seq} does not match the signed head")
    return VerifyResult(True, None, "intact", records, checkpoints)


def _without_head(directory: Path, keys: Keys, problem: str) -> VerifyResult:
    """Still check the chain and checkpoints, to name a bad record if there is one;
    truncation after the last record cannot be ruled out without the head."""
    first = next(_parsed(directory), None)
    if first is None or first[0] is None:
        return VerifyResult(False, None, problem)
    rec = first[0]
    start = {"first_seq": int(rec["seq"]), "first_prev_hash": rec.get("prev_hash", GENESIS)}
    try:
        records, checkpoints, last = _walk(directory, keys, start)
    except _Bad as bad:
        return VerifyResult(False, bad.seq, f"{problem}; {bad.reason}")
    last_seq = int(last["seq"]) if last is not None else -1
    return VerifyResult(
        False,
        None,
        f"{problem}; the chain of {records} records up to seq {last_seq} is intact, "
        "but truncation after it cannot be ruled out",
        records,
        checkpoints,
    )


def _walk(
    directory: Path, keys: Keys, head: dict[str, Any]
) -> tuple[int, int, dict[str, Any] | None]:
    expected = int(head["first_seq"])
    prev: str = str(head["first_prev_hash"]) if expected else GENESIS
    records = checkpoints = 0
    last: dict[str, Any] | None = None
    stream = _parsed(directory)
    pending: tuple[dict[str, Any] | None, str] | None = None
    while True:
        item = pending if pending is not None else next(stream, None)
        pending = None
        if item is None:
            return records, checkpoints, last
        rec, where = item
        if rec is None:
            raise _Bad(expected, f"record {expected} is unreadable ({where})")
        seq = int(rec["seq"])
        if seq > expected:
            pending = next(stream, None)
            if pending is not None and pending[0] is not None and pending[0].get("seq") == expected:
                raise _Bad(expected, f"record {expected} was reordered: seq {seq} comes before it")
            raise _Bad(expected, f"record {expected} was removed: seq {seq} follows {expected - 1}")
        if seq < expected:
            raise _Bad(
                seq, f"record {seq} was inserted or reordered: it appears after {expected - 1}"
            )
        if record_hash(rec) != rec["hash"]:
            raise _Bad(seq, f"record {seq} was changed: its hash does not match ({where})")
        if rec.get("prev_hash") != prev:
            raise _Bad(
                seq, f"record {seq} does not chain to record {seq - 1} (changed or replaced)"
            )
        if rec.get("kind") == "checkpoint":
            claim = checkpoint_claim(seq, rec["ts"], rec["prev_hash"])
            if not keys.check(claim, rec.get("mac")):
                raise _Bad(seq, f"checkpoint {seq} has an invalid signature")
            checkpoints += 1
        prev = str(rec["hash"])
        expected += 1
        records += 1
        last = rec


def cli_verify(path: str | os.PathLike[str], key: bytes, out: TextIO | None = None) -> int:
    """Exit code for ``tokenplane audit verify``: 0 intact, 1 tampered, 2 unreadable."""
    stream = out if out is not None else sys.stdout
    result = verify(path, key)
    if result.ok:
        stream.write(
            f"audit log intact: {result.records} records, {result.checkpoints} checkpoints\n"
        )
        return 0
    where = f" at record {result.first_bad_seq}" if result.first_bad_seq is not None else ""
    stream.write(f"audit log FAILED verification{where}: {result.reason}\n")
    return 1 if result.first_bad_seq is not None else 2
