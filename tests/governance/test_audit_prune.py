from __future__ import annotations

from pathlib import Path

import orjson

from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.audit.signing import Verifier
from tokenplane.governance.audit.verify import verify

from .audit_helpers import KEY, T0, build, entry, lines, rewrite

DAY = 86_400.0


def test_prune_keeps_chain_verifiable(tmp_path: Path) -> None:
    build(tmp_path, 40, checkpoint_every=5, step=DAY)  # one record a day
    log = AuditLog(tmp_path, KEY, checkpoint_every=5)
    removed = log.prune(now=T0 + 40 * DAY, retention_days=20)
    assert removed > 0
    recs = [orjson.loads(line) for line in lines(tmp_path)]
    assert recs[0]["kind"] == "checkpoint"  # the anchor
    assert all(r["ts"] >= T0 + 15 * DAY for r in recs)  # at most one checkpoint span older
    assert verify(tmp_path, KEY).ok
    assert verify(tmp_path, Verifier.from_secret(KEY).public_only()).ok  # an auditor's check
    # The log keeps working after pruning.
    log.append(entry(100), ts=T0 + 41 * DAY)
    log.close()
    assert verify(tmp_path, KEY).ok


def test_prune_nothing_old_is_a_no_op(tmp_path: Path) -> None:
    build(tmp_path, 10, checkpoint_every=5)
    log = AuditLog(tmp_path, KEY)
    assert log.prune(now=T0 + 10, retention_days=180) == 0
    log.close()
    assert verify(tmp_path, KEY).ok


def test_deleting_more_after_prune_is_caught(tmp_path: Path) -> None:
    build(tmp_path, 40, checkpoint_every=5, step=DAY)
    log = AuditLog(tmp_path, KEY, checkpoint_every=5)
    log.prune(now=T0 + 40 * DAY, retention_days=20)
    log.close()
    ls = lines(tmp_path)
    first = orjson.loads(ls[0])["seq"]
    nxt = next(i for i, line in enumerate(ls) if i > 0 and b'"kind":"checkpoint"' in line)
    rewrite(tmp_path, ls[nxt:])  # drop one more checkpoint span without the key
    result = verify(tmp_path, KEY)
    assert not result.ok and result.first_bad_seq == first
