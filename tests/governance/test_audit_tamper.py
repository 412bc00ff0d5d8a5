from __future__ import annotations

import io
from pathlib import Path

import orjson

from tokenplane.governance.audit.chain import seal
from tokenplane.governance.audit.segments import HEAD_NAME
from tokenplane.governance.audit.verify import cli_verify, verify

from .audit_helpers import KEY, build, lines, rewrite, seq_of


def test_intact_log_verifies(tmp_path: Path) -> None:
    build(tmp_path, 30)
    result = verify(tmp_path, KEY)
    assert result.ok and result.records == 36 and result.checkpoints == 6
    out = io.StringIO()
    assert cli_verify(tmp_path, KEY, out) == 0 and "intact" in out.getvalue()


def test_wrong_key_fails(tmp_path: Path) -> None:
    build(tmp_path, 3)
    assert not verify(tmp_path, b"another-key-another-key!").ok


def test_edit_is_caught_at_the_record(tmp_path: Path) -> None:
    build(tmp_path, 20)
    ls = lines(tmp_path)
    ls[10] = ls[10].replace(b'"principal":"alice"', b'"principal":"mallory"')
    rewrite(tmp_path, ls)
    result = verify(tmp_path, KEY)
    assert not result.ok and result.first_bad_seq == 10 and "changed" in result.reason
    out = io.StringIO()
    assert cli_verify(tmp_path, KEY, out) == 1 and "record 10" in out.getvalue()


def test_edit_with_recomputed_hash_is_named_by_the_checkpoint(tmp_path: Path) -> None:
    build(tmp_path, 20)
    ls = lines(tmp_path)
    rec = orjson.loads(ls[4])
    rec.pop("hash")
    rec["tokens"] = {"input": 1, "output": 1}
    forged_line, _ = seal(rec)
    ls[4] = forged_line
    rewrite(tmp_path, ls)
    result = verify(tmp_path, KEY)
    # the link to record 5 breaks; checkpoint 5's signed hashes say record 4 changed
    assert result.first_bad_seq == 4 and "checkpoint 5 signed" in result.reason


def test_delete_is_caught_at_the_record(tmp_path: Path) -> None:
    build(tmp_path, 20)
    ls = lines(tmp_path)
    del ls[7]
    rewrite(tmp_path, ls)
    result = verify(tmp_path, KEY)
    assert result.first_bad_seq == 7 and "removed" in result.reason


def test_insert_is_caught_at_the_record(tmp_path: Path) -> None:
    build(tmp_path, 20)
    ls = lines(tmp_path)
    ls.insert(12, ls[3])  # a copy of an old record
    rewrite(tmp_path, ls)
    result = verify(tmp_path, KEY)
    assert result.first_bad_seq == 3 and "inserted" in result.reason


def test_forged_insert_with_valid_hash_is_caught(tmp_path: Path) -> None:
    build(tmp_path, 20)
    ls = lines(tmp_path)
    prev = orjson.loads(ls[8])
    forged = {k: v for k, v in orjson.loads(ls[9]).items() if k != "hash"}
    forged["prev_hash"] = prev["hash"]
    forged["principal"] = "mallory"
    line, _ = seal(forged)
    ls.insert(9, line)  # claims seq 9, chains to 8; the real 9 now follows it
    rewrite(tmp_path, ls)
    result = verify(tmp_path, KEY)
    assert result.first_bad_seq == 9 and "inserted or reordered" in result.reason


def test_reorder_is_caught_at_the_record(tmp_path: Path) -> None:
    build(tmp_path, 20)
    ls = lines(tmp_path)
    ls[5], ls[6] = ls[6], ls[5]
    rewrite(tmp_path, ls)
    result = verify(tmp_path, KEY)
    assert result.first_bad_seq == 5 and "reordered" in result.reason


def test_truncation_is_caught_by_the_signed_head(tmp_path: Path) -> None:
    build(tmp_path, 20)
    ls = lines(tmp_path)
    last = seq_of(ls[-1])
    rewrite(tmp_path, ls[:-3])
    result = verify(tmp_path, KEY)
    assert not result.ok and result.first_bad_seq == last - 2 and "truncated" in result.reason


def test_missing_or_forged_head_fails(tmp_path: Path) -> None:
    build(tmp_path, 5)
    head = orjson.loads((tmp_path / HEAD_NAME).read_bytes())
    head["seq"] = 2
    (tmp_path / HEAD_NAME).write_bytes(orjson.dumps(head))
    assert "signature" in verify(tmp_path, KEY).reason
    (tmp_path / HEAD_NAME).unlink()
    result = verify(tmp_path, KEY)
    assert not result.ok and "missing" in result.reason and "intact" in result.reason
    assert cli_verify(tmp_path, KEY, io.StringIO()) == 2


def test_without_head_a_changed_record_is_still_named(tmp_path: Path) -> None:
    build(tmp_path, 10)
    (tmp_path / HEAD_NAME).unlink()
    ls = lines(tmp_path)
    ls[4] = ls[4].replace(b'"status":200', b'"status":500')
    rewrite(tmp_path, ls)
    result = verify(tmp_path, KEY)
    assert result.first_bad_seq == 4 and "changed" in result.reason


def test_forged_checkpoint_signature_fails(tmp_path: Path) -> None:
    build(tmp_path, 12)
    ls = lines(tmp_path)
    idx = next(i for i, line in enumerate(ls) if b'"kind":"checkpoint"' in line)
    rec = {k: v for k, v in orjson.loads(ls[idx]).items() if k != "hash"}
    rec["mac"] = "0" * 64
    ls[idx], _ = seal(rec)
    rewrite(tmp_path, ls)
    result = verify(tmp_path, KEY)
    # the checkpoint covers records 0..5; none of them can be trusted: the range and
    # its first record are named
    assert result.bad_range == (0, seq_of(ls[idx])) and result.first_bad_seq == 0
    assert "invalid signature" in result.reason


def test_garbage_line_is_reported(tmp_path: Path) -> None:
    build(tmp_path, 6)
    ls = lines(tmp_path)
    ls[2] = b"{not json\n"
    rewrite(tmp_path, ls)
    result = verify(tmp_path, KEY)
    assert result.first_bad_seq == 2 and "unreadable" in result.reason
