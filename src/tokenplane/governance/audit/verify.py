"""Check an audit log: chain, order, signatures, head; name the first bad record.

A record edited in place fails its own hash. A record edited with its hash (and the
chain after it) recomputed passes the chain, but not the hashes that the next
signed checkpoint (or the signed head, for the records after the last checkpoint)
lists for the records it covers: the first record whose hash differs from the
signed list is named. If the checkpoint itself was rewritten, its signature fails
and the range it covers is named, with the first record in it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson

from tokenplane.governance.audit.chain import (
    DIGEST_HEX,
    GENESIS,
    checkpoint_claim,
    record_hash,
)
from tokenplane.governance.audit.segments import iter_raw, read_head
from tokenplane.governance.audit.signing import Verifier, claim_of, head_signed


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    first_bad_seq: int | None = None
    reason: str = ""
    records: int = 0
    checkpoints: int = 0
    bad_range: tuple[int, int] | None = None  # records that cannot be trusted, inclusive
    last_seq: int | None = None
    forged_head: bool = False  # the head is there but not signed by the key given


class _Bad(Exception):
    def __init__(self, seq: int | None, reason: str,
                 bad_range: tuple[int, int] | None = None) -> None:
        super().__init__(reason)
        self.seq = seq
        self.reason = reason
        self.bad_range = bad_range


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


def _verifier(key: bytes | Verifier) -> Verifier:
    return key if isinstance(key, Verifier) else Verifier.from_secret(key)


def verify(path: str | os.PathLike[str], key: bytes | Verifier) -> VerifyResult:
    """Verify every segment in ``path`` against the chain, checkpoints and signed head.
    ``key``: the secret, or a :class:`Verifier` (a public key)."""
    directory = Path(path)
    verifier = _verifier(key)
    head = read_head(directory)
    if head is None or not head_signed(head, verifier):
        return _without_head(directory, verifier, _head_problem(head, verifier),
                             forged_head=head is not None)
    walk = _Walk(verifier, int(head["first_seq"]), str(head["first_prev_hash"]))
    try:
        walk.run(_parsed(directory))
        if "tail" in head:
            walk.match(int(head["tail_first"]), head["tail"], "the signed head",
                       int(head["seq"]) + 1)
        walk.raise_pending()
    except _Bad as bad:
        return VerifyResult(False, bad.seq, bad.reason, walk.records, walk.checkpoints,
                            bad.bad_range)
    records, checkpoints, last = walk.records, walk.checkpoints, walk.last
    head_seq = int(head["seq"])
    if last is None:
        if head_seq >= int(head["first_seq"]):
            return VerifyResult(False, int(head["first_seq"]), "all records are missing")
        return VerifyResult(True, records=0, reason="intact")
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
        lo = walk.interval_start()
        return VerifyResult(
            False, lo,
            f"record {last_seq} does not match the signed head: records {lo}..{last_seq} "
            f"(after the last checkpoint) were changed; the first of them is {lo}",
            records, checkpoints, (lo, last_seq))
    return VerifyResult(True, None, "intact", records, checkpoints, last_seq=last_seq)


def _head_problem(head: dict[str, Any] | None, verifier: Verifier) -> str:
    if head is None:
        return "head file HEAD.json is missing or unreadable"
    if "sig" not in head and verifier.legacy is None:
        return ("head file is in the HMAC format of earlier versions: verify it with the "
                "secret key, not a public key")
    if head.get("signer") not in (None, verifier.signer):
        return (f"head file is signed by key {head.get('signer')}, not by the key given "
                f"({verifier.signer})")
    return "head file signature is invalid (wrong key or edited)"


def _without_head(directory: Path, verifier: Verifier, problem: str,
                  forged_head: bool) -> VerifyResult:
    """Still check the chain and checkpoints, to name a bad record if there is one;
    truncation after the last record cannot be ruled out without the head."""
    first = next(_parsed(directory), None)
    if first is None or first[0] is None:
        return VerifyResult(False, None, problem, forged_head=forged_head)
    rec = first[0]
    walk = _Walk(verifier, int(rec["seq"]), str(rec.get("prev_hash", GENESIS)))
    try:
        walk.run(_parsed(directory))
        walk.raise_pending()
    except _Bad as bad:
        return VerifyResult(False, bad.seq, f"{problem}; {bad.reason}", walk.records,
                            walk.checkpoints, bad.bad_range, forged_head=forged_head)
    last_seq = int(walk.last["seq"]) if walk.last is not None else -1
    return VerifyResult(
        False,
        None,
        f"{problem}; the chain of {walk.records} records up to seq {last_seq} is intact, "
        "but truncation after it cannot be ruled out",
        walk.records,
        walk.checkpoints,
        forged_head=forged_head,
    )


class _Walk:
    """One pass over the records. A broken link is held until the next signed list
    of hashes (a checkpoint's or the head's) says which record was changed."""

    def __init__(self, verifier: Verifier, first_seq: int, first_prev: str) -> None:
        self.verifier = verifier
        self.first_seq = first_seq
        self.expected = first_seq
        self.prev = first_prev if first_seq else GENESIS
        self.records = 0
        self.checkpoints = 0
        self.last: dict[str, Any] | None = None
        self.last_checkpoint: int | None = None  # seq of the last one verified
        self.interval: list[tuple[int, str]] = []  # (seq, hash) since it, it included
        self.pending: _Bad | None = None  # a broken link, not yet explained

    def interval_start(self) -> int:
        """The first record after the last verified checkpoint."""
        return self.first_seq if self.last_checkpoint is None else self.last_checkpoint + 1

    def raise_pending(self) -> None:
        if self.pending is not None:
            raise self.pending

    def run(self, stream: Iterator[tuple[dict[str, Any] | None, str]]) -> None:
        for rec, where in stream:
            try:
                self._record(rec, where, stream)
            except _Bad as bad:
                raise _earlier(bad, self.pending) from None

    def _record(self, rec: dict[str, Any] | None, where: str,
                stream: Iterator[tuple[dict[str, Any] | None, str]]) -> None:
        expected = self.expected
        if rec is None:
            raise _Bad(expected, f"record {expected} is unreadable ({where})")
        seq = int(rec["seq"])
        if seq > expected:
            ahead = next(stream, None)
            if ahead is not None and ahead[0] is not None and ahead[0].get("seq") == expected:
                raise _Bad(expected,
                           f"record {expected} was reordered: seq {seq} comes before it")
            raise _Bad(expected,
                       f"record {expected} was removed: seq {seq} follows {expected - 1}")
        if seq < expected:
            raise _Bad(
                seq, f"record {seq} was inserted or reordered: it appears after {expected - 1}"
            )
        if record_hash(rec) != rec["hash"]:
            raise _Bad(seq, f"record {seq} was changed: its hash does not match ({where})")
        if rec.get("prev_hash") != self.prev and self.pending is None:
            self.pending = _Bad(
                seq, f"record {seq} does not chain to record {seq - 1} (changed or replaced)")
        if rec.get("kind") == "checkpoint":
            self._checkpoint(rec)
        self.interval.append((seq, str(rec["hash"])))
        self.prev = str(rec["hash"])
        self.expected += 1
        self.records += 1
        self.last = rec

    def _checkpoint(self, rec: dict[str, Any]) -> None:
        seq = int(rec["seq"])
        lo = self.interval_start()
        if "sig" in rec:
            if not self.verifier.check(claim_of(rec), rec["sig"]):
                self.raise_pending()
                whose = rec.get("signer")
                why = ("forged or edited" if whose in (None, self.verifier.signer)
                       else f"signed by key {whose}, not by the key given ({self.verifier.signer})")
                raise _Bad(lo, f"checkpoint {seq} has an invalid signature ({why}): records "
                               f"{lo}..{seq} cannot be trusted; the first of them is {lo}",
                           (lo, seq))
            self.match(int(rec["first"]), rec["digests"], f"checkpoint {seq}", seq,
                       str(rec["prev_hash"]))
        else:
            legacy = self.verifier.legacy
            if legacy is None:
                raise _Bad(seq, f"checkpoint {seq} is in the HMAC format of earlier versions: "
                                "verify with the secret key, not a public key")
            claim = checkpoint_claim(seq, rec["ts"], rec["prev_hash"])
            if not legacy.check(claim, rec.get("mac")):
                self.raise_pending()
                raise _Bad(lo, f"checkpoint {seq} has an invalid signature: records "
                               f"{lo}..{seq} cannot be trusted; the first of them is {lo}",
                           (lo, seq))
            self.raise_pending()
        self.checkpoints += 1
        self.last_checkpoint = seq
        self.interval = []

    def match(self, first: int, digests: object, who: str, end: int,
              prev_hash: str | None = None) -> None:
        """Compare the records walked since the last checkpoint with the hashes ``who``
        signed for records ``first``..``end - 1``; name the first that differs."""
        if not isinstance(digests, list) or first + len(digests) != end:
            raise _Bad(first, f"{who} lists the hashes of the wrong records")
        for seq, digest in self.interval:
            i = seq - first
            if 0 <= i < len(digests) and digest[:DIGEST_HEX] != digests[i]:
                raise _Bad(seq, f"record {seq} was changed: its hash is not the one {who} "
                                f"signed ({who} covers records "
                                f"{max(first, self.first_seq)}..{end - 1})")
        if prev_hash is not None and digests and prev_hash[:DIGEST_HEX] != digests[-1]:
            raise _Bad(end, f"{who} does not follow the record it signed (record {end - 1})")
        self.raise_pending()


def _earlier(bad: _Bad, pending: _Bad | None) -> _Bad:
    """The problem at the lower seq: a link broken before ``bad`` is reported first."""
    if pending is None or pending.seq is None or bad.seq is None or bad.seq <= pending.seq:
        return bad
    return pending


def cli_verify(path: str | os.PathLike[str], key: bytes | Verifier,
               out: TextIO | None = None, *, integrity_only: str | None = None) -> int:
    """Exit code for ``tokenplane audit verify``: 0 intact, 1 tampered (a record named,
    or the head signed by another key), 2 unreadable (the head missing), 3 consistent
    but not authenticated (``integrity_only`` says why)."""
    stream = out if out is not None else sys.stdout
    result = verify(path, key)
    if result.ok and integrity_only:
        stream.write(
            f"audit log integrity only, not authenticity: {result.records} records, "
            f"{result.checkpoints} checkpoints consistent, but {integrity_only}\n"
        )
        return 3
    if result.ok:
        stream.write(
            f"audit log intact: {result.records} records, {result.checkpoints} checkpoints\n"
        )
        return 0
    where = f" at record {result.first_bad_seq}" if result.first_bad_seq is not None else ""
    stream.write(f"audit log FAILED verification{where}: {result.reason}\n")
    return 1 if result.first_bad_seq is not None or result.forged_head else 2


@dataclass(frozen=True)
class Anchor:
    """A checkpoint as shipped off the host (the ``tokenplane.audit.anchor`` log line)."""

    log: str  # the worker directory's name
    seq: int
    hash: str


def read_anchors(text: str) -> list[Anchor]:
    """Anchors from JSON lines, or from log lines holding ``audit anchor {...}``."""
    out: list[Anchor] = []
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            obj = orjson.loads(line[start:])
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict) and {"log", "seq", "hash"} <= obj.keys():
            out.append(Anchor(str(obj["log"]), int(obj["seq"]), str(obj["hash"])))
    return out


def check_anchors(path: str | os.PathLike[str], anchors: list[Anchor]) -> str | None:
    """None when every anchor of this log is still in it with the same hash (or was
    pruned away), else what is wrong: a rollback or truncation to before an anchor, a
    rewritten log, or the whole log replaced."""
    directory = Path(path)
    mine = {a.seq: a.hash for a in anchors if a.log == directory.name}
    if not mine:
        return None
    head = read_head(directory)
    first = int(head["first_seq"]) if head is not None else 0
    seen: dict[int, str] = {}
    last = -1
    for raw in iter_raw(directory):
        try:
            rec = orjson.loads(raw.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("seq"), int):
            last = max(last, rec["seq"])
            if rec["seq"] in mine:
                seen[rec["seq"]] = str(rec.get("hash"))
    for seq in sorted(mine):
        if seq < first:
            continue  # pruned
        if seq not in seen:
            return (f"anchored checkpoint {seq} is not in the log (it ends at {last}): "
                    "rolled back or truncated")
        if seen[seq] != mine[seq]:
            return f"record {seq} is not the anchored checkpoint: the log was rewritten"
    return None
