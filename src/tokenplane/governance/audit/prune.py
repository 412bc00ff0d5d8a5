"""Retention: remove old records up to a signed checkpoint, keeping the chain verifiable."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from tokenplane.governance.audit.chain import head_claim
from tokenplane.governance.audit.segments import list_segments, read_head, write_head
from tokenplane.governance.audit.signing import FORMAT, Signer, Verifier, head_signed

DEFAULT_RETENTION_DAYS = 180


def prune_log(directory: Path, signer: Signer, verifier: Verifier, cutoff_ts: float) -> int:
    """Remove every record before the last checkpoint written at or before ``cutoff_ts``.

    That checkpoint becomes the first record; its signature covers the hash of
    the record before it (and the hashes of the records it follows), which anchors
    the rest of the chain. The head records the new first seq (signed), so removing
    more later is detected. Returns the number of records removed. Run with no writer
    appending (``AuditLog.prune``). A head of the first format (HMAC) is re-signed in
    the current one.
    """
    head = read_head(directory)
    if head is None or not head_signed(head, verifier):
        raise ValueError("cannot prune: head missing or not signed by this key")
    anchor: tuple[Path, int, int, str] | None = None  # segment, line index, seq, prev_hash
    for seg in list_segments(directory):
        stop = False
        for i, line in enumerate(seg.read_bytes().splitlines()):
            rec = orjson.loads(line)
            if rec["ts"] > cutoff_ts:
                stop = True
                break
            if rec.get("kind") == "checkpoint":
                anchor = (seg, i, int(rec["seq"]), str(rec["prev_hash"]))
        if stop:
            break
    if anchor is None or anchor[2] <= int(head["first_seq"]):
        return 0
    seg_path, line_index, seq, prev_hash = anchor
    removed = seq - int(head["first_seq"])
    head = {**head, "first_seq": seq, "first_prev_hash": prev_hash}
    head.pop("mac", None)
    head.pop("sig", None)
    if head.get("v") != FORMAT:  # a head of the first format lists no digests
        head.update(v=FORMAT, tail_first=int(head["seq"]) + 1, tail=[])
    head["signer"] = signer.signer
    head["sig"] = signer.sign(head_claim(head))
    # Files first, head last: a crash in between makes verify report the gap, and
    # running prune again completes the job.
    for seg in list_segments(directory):
        if seg == seg_path:
            lines = seg.read_bytes().splitlines(keepends=True)
            tmp = seg.with_suffix(".tmp")
            tmp.write_bytes(b"".join(lines[line_index:]))
            os.replace(tmp, seg)
            break
        seg.unlink()
    write_head(directory, head)
    return removed
