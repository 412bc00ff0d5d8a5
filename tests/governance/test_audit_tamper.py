from __future__ import annotations

import io
import logging
import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from tokenplane.cli.main import build_cli
from tokenplane.governance.audit.chain import GENESIS, Keys, checkpoint_claim, head_claim, seal
from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.audit.segments import HEAD_NAME, segment_name, write_head
from tokenplane.governance.audit.signing import Verifier
from tokenplane.governance.audit.verify import check_anchors, cli_verify, read_anchors, verify

from .audit_helpers import KEY, T0, build, entry, lines, rehash_from, rewrite, seq_of


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
    assert cli_verify(tmp_path, KEY, io.StringIO()) == 1  # tampered
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


def test_rewritten_checkpoint_names_its_range_and_first_record(tmp_path: Path) -> None:
    _default_log(tmp_path, 250)
    forged = _change_and_rehash(tmp_path, 120)
    cp = orjson.loads(forged[201])
    assert cp["kind"] == "checkpoint" and cp["first"] == 100
    cp.pop("hash")
    cp["digests"][20] = orjson.loads(forged[120])["hash"][:32]  # cover the change
    forged[201], _ = seal(cp)
    rewrite(tmp_path, rehash_from(forged, 201))
    result = verify(tmp_path, KEY)
    assert result.bad_range == (101, 201) and result.first_bad_seq == 101
    assert "checkpoint 201 has an invalid signature" in result.reason


def test_a_checkpoint_follows_the_interval_and_is_logged_for_anchoring(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = AuditLog(tmp_path, KEY, checkpoint_every=100, checkpoint_interval_s=5.0)
    log.append(entry(0), ts=T0)
    log.append(entry(1), ts=T0 + 1)
    log.flush(now=T0 + 4.9)
    assert [orjson.loads(x)["kind"] for x in lines(tmp_path)] == ["request"] * 2
    with caplog.at_level(logging.INFO, logger="tokenplane.audit.anchor"):
        log.flush(now=T0 + 5.0)
    recs = [orjson.loads(x) for x in lines(tmp_path)]
    assert [r["kind"] for r in recs] == ["request", "request", "checkpoint"]
    anchors = [r.getMessage() for r in caplog.records if r.name == "tokenplane.audit.anchor"]
    assert len(anchors) == 1
    anchor = orjson.loads(anchors[0].removeprefix("audit anchor "))
    assert (anchor["seq"], anchor["hash"]) == (2, recs[2]["hash"])
    log.flush(now=T0 + 20)  # nothing new: no checkpoint, no second anchor
    log.close()
    assert len(lines(tmp_path)) == 3 and verify(tmp_path, KEY).ok


# --- logs of the first format (HMAC-signed) ---------------------------------------------

def _legacy_log(path: Path, n: int, every: int = 5) -> None:
    """A log as versions before Ed25519 wrote it: HMAC ``mac`` on checkpoints and head."""
    keys = Keys.derive(KEY)
    out: list[bytes] = []
    prev = GENESIS
    for i in range(n):
        seq = len(out)
        line, prev = seal({**entry(i).to_fields(), "seq": seq, "ts": T0 + i, "prev_hash": prev})
        out.append(line)
        if (i + 1) % every == 0:
            seq, ts = len(out), T0 + i
            mac = keys.sign(checkpoint_claim(seq, ts, prev))
            line, prev = seal({"kind": "checkpoint", "mac": mac, "seq": seq, "ts": ts,
                               "prev_hash": prev})
            out.append(line)
    path.mkdir(parents=True, exist_ok=True)
    (path / segment_name(1, "20260101")).write_bytes(b"".join(out))
    head = {"seq": len(out) - 1, "hash": prev, "first_seq": 0, "first_prev_hash": GENESIS}
    head["mac"] = keys.sign(head_claim(head))
    write_head(path, head)


def test_a_log_of_the_first_format_still_verifies_and_is_continued(tmp_path: Path) -> None:
    _legacy_log(tmp_path, 12)
    assert verify(tmp_path, KEY).ok
    public_only = verify(tmp_path, Verifier.from_secret(KEY).public_only())
    assert not public_only.ok and "HMAC format" in public_only.reason
    log = AuditLog(tmp_path, KEY, checkpoint_every=5)  # an upgraded gateway goes on
    for i in range(12, 20):
        log.append(entry(i), ts=T0 + i)
    log.close()
    result = verify(tmp_path, KEY)
    assert result.ok and result.checkpoints == 4
    kinds = [(r.get("v"), "mac" in r) for r in map(orjson.loads, lines(tmp_path))
             if r["kind"] == "checkpoint"]
    assert kinds == [(None, True), (None, True), (2, False), (2, False)]
    ls = lines(tmp_path)
    ls[3] = ls[3].replace(b'"principal":"alice"', b'"principal":"mallory"')
    rewrite(tmp_path, ls)
    assert verify(tmp_path, KEY).first_bad_seq == 3


# --- rollback: only an anchor kept off the host shows it --------------------------------

def test_a_rolled_back_log_verifies_alone_but_fails_its_anchors(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "w0"
    old = tmp_path / "old"
    log = AuditLog(path, KEY, checkpoint_every=3, checkpoint_interval_s=1.0)
    with caplog.at_level(logging.INFO, logger="tokenplane.audit.anchor"):
        for i in range(4):
            log.append(entry(i), ts=T0 + i)
        log.flush(now=T0 + 4)
        shutil.copytree(path, old)  # what the attacker keeps, head and all
        for i in range(4, 10):
            log.append(entry(i), ts=T0 + i)
        log.flush(now=T0 + 10)
    log.close()
    shipped = read_anchors("\n".join(r.getMessage() for r in caplog.records))
    assert len(shipped) == 2  # one per flush: the newest checkpoint each time
    assert check_anchors(path, shipped) is None
    shutil.rmtree(path)
    old.rename(path)  # the log rolled back to its state at T0 + 4
    assert verify(path, KEY).ok  # signed by the right key: nothing in the log shows it
    problem = check_anchors(path, shipped)
    assert problem == (f"anchored checkpoint {shipped[1].seq} is not in the log (it ends at "
                       f"{shipped[0].seq}): rolled back or truncated")
    anchors = tmp_path / "anchors.log"
    anchors.write_text("\n".join(f"... INFO tokenplane.audit.anchor {r.getMessage()}"
                                 for r in caplog.records))
    r = CliRunner().invoke(build_cli(), ["audit", "verify", "--home", str(tmp_path), "--dir",
                                         str(path), "--anchors", str(anchors)],
                           env={"TOKENPLANE_AUDIT_KEY": KEY.decode()})
    assert r.exit_code == 1 and "rolled back" in r.output, r.output


def test_anchors_of_a_log_that_is_gone_fail_verify(tmp_path: Path) -> None:
    for name in ("w0", "w1"):
        build(tmp_path / "audit" / name, 6)  # a checkpoint at seq 5
    shipped = []
    for name in ("w0", "w1"):
        cp = orjson.loads(lines(tmp_path / "audit" / name)[5])
        assert cp["kind"] == "checkpoint"
        shipped.append(orjson.dumps({"log": name, "seq": 5, "hash": cp["hash"]}).decode())
    anchors = tmp_path / "anchors.jsonl"
    anchors.write_text("\n".join(shipped))
    args = ["audit", "verify", "--home", str(tmp_path), "--anchors", str(anchors)]
    env = {"TOKENPLANE_AUDIT_KEY": KEY.decode()}
    assert CliRunner().invoke(build_cli(), args, env=env).exit_code == 0
    shutil.rmtree(tmp_path / "audit" / "w1")
    r = CliRunner().invoke(build_cli(), args, env=env)
    assert r.exit_code == 1, r.output
    assert "w1: audit log FAILED the anchors: the log is missing" in r.output
    assert "w0: audit log intact" in r.output
