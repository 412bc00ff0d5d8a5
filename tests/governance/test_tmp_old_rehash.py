from __future__ import annotations
import io
from pathlib import Path
import orjson
from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.audit.verify import cli_verify, verify
from tests.governance.audit_helpers import KEY, T0, entry, lines, rehash_from, rewrite, seq_of
# --- a chain re-hashed after a change (no key needed) ---------------------------------

def _default_log(path: Path, n: int) -> None:
    """``n`` requests with the writer's default checkpoint interval."""
    log = AuditLog(path, KEY, group_size=64)
    for i in range(n):
        log.append(entry(i), ts=T0 + i)
    log.close()


def _change_and_rehash(path: Path, seq: int) -> list[bytes]:
    ls = lines(path)
    assert seq_of(ls[seq]) == seq
    rec = orjson.loads(ls[seq])
    rec["principal"] = "mallory"
    ls[seq] = orjson.dumps(rec) + b"\n"
    forged = rehash_from(ls, seq)
    rewrite(path, forged)
    return forged


def test_rehashed_chain_names_the_changed_record_not_the_last(tmp_path: Path) -> None:
    _default_log(tmp_path, 250)  # checkpoints at seq 100 and 201; 250 records after
    _change_and_rehash(tmp_path, 120)
    result = verify(tmp_path, KEY)
    assert not result.ok and result.first_bad_seq == 120
    assert "record 120 was changed" in result.reason and "checkpoint 201" in result.reason
    out = io.StringIO()
    assert cli_verify(tmp_path, KEY, out) == 1 and "at record 120" in out.getvalue()


def test_rehashed_tail_after_the_last_checkpoint_is_named_by_the_head(tmp_path: Path) -> None:
    _default_log(tmp_path, 250)
    _change_and_rehash(tmp_path, 230)
    result = verify(tmp_path, KEY)
    assert result.first_bad_seq == 230 and "signed head" in result.reason


