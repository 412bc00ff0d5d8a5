from __future__ import annotations

import itertools
from pathlib import Path

import orjson
import pytest
from cryptography.exceptions import InvalidTag

from tokenplane.governance.audit.content import Retention, decrypt_content
from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.audit.query import export_jsonl, search
from tokenplane.governance.audit.segments import HEAD_NAME, list_segments
from tokenplane.governance.audit.verify import verify

from .audit_helpers import KEY, T0, build, entry, lines
from .factories import cn_id

ID = cn_id()


def _content_of(path: Path, seq: int) -> object:
    rec = next(orjson.loads(line) for line in lines(path) if orjson.loads(line)["seq"] == seq)
    return rec.get("content")


def test_records_carry_seq_chain_and_checkpoints(tmp_path: Path) -> None:
    build(tmp_path, 10, checkpoint_every=4)
    recs = [orjson.loads(line) for line in lines(tmp_path)]
    assert [r["seq"] for r in recs] == list(range(12))
    assert [r["kind"] for r in recs].count("checkpoint") == 2
    assert all(b["prev_hash"] == a["hash"] for a, b in itertools.pairwise(recs))


def test_redacted_retention_is_the_default(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, KEY)
    e = entry(0)
    e.content = {"messages": [{"role": "user", "content": f"我的身份证是{ID}，邮箱a@b.cn"}]}
    log.append(e, ts=T0)
    log.close()
    raw = b"".join(lines(tmp_path))
    assert ID.encode() not in raw and b"a@b.cn" not in raw
    msg = _content_of(tmp_path, 0)["messages"][0]["content"]  # type: ignore[index]
    assert msg == "我的身份证是110105********002X，邮箱a***@b.cn"


def test_none_retention_drops_content(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, KEY, retention="none")
    log.append(entry(0), ts=T0)
    log.close()
    assert _content_of(tmp_path, 0) is None
    assert verify(tmp_path, KEY).ok


def test_full_retention_is_encrypted(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, KEY, retention=Retention.FULL)
    e = entry(0)
    e.content = {"prompt": f"id {ID}"}
    log.append(e, ts=T0)
    log.close()
    assert ID.encode() not in b"".join(lines(tmp_path))
    blob = _content_of(tmp_path, 0)
    assert isinstance(blob, dict) and blob["enc"] == "aes-256-gcm"
    assert decrypt_content(blob, log.keys.content, 0) == {"prompt": f"id {ID}"}
    with pytest.raises(InvalidTag):  # bound to its seq: cannot be moved to another record
        decrypt_content(blob, log.keys.content, 1)


def test_rotation_by_day_and_size_keeps_one_chain(tmp_path: Path) -> None:
    build(tmp_path, 10, step=43_200.0)  # two records a day
    assert len(list_segments(tmp_path)) == 5
    assert verify(tmp_path, KEY).ok
    other = tmp_path / "small"
    log = AuditLog(other, KEY, max_bytes=2_000, group_size=1)
    for i in range(20):
        log.append(entry(i), ts=T0 + i)
    log.close()
    assert len(list_segments(other)) > 3
    assert verify(other, KEY).ok


def test_reopen_continues_the_chain(tmp_path: Path) -> None:
    build(tmp_path, 5)
    log = AuditLog(tmp_path, KEY, checkpoint_every=5)
    assert log.next_seq == 6
    log.append(entry(99), ts=T0 + 100)
    log.close()
    result = verify(tmp_path, KEY)
    assert result.ok and result.records == 7


def test_unflushed_records_are_not_yet_on_disk_but_flush_writes_them(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, KEY, group_size=100)
    log.append(entry(0), ts=T0)
    assert lines(tmp_path) == []
    log.flush()
    assert len(lines(tmp_path)) == 1 and verify(tmp_path, KEY).ok
    log.close()


def test_search_is_tenant_scoped_and_filters(tmp_path: Path) -> None:
    with AuditLog(tmp_path, KEY, checkpoint_every=3) as log:
        for i in range(12):
            tenant = "acme" if i % 2 else "globex"
            log.append(entry(i, tenant, "block" if i % 4 == 1 else "allow"), ts=T0 + i)
    acme = search(tmp_path, tenant="acme")
    assert {r["tenant"] for r in acme} == {"acme"} and len(acme) == 6
    assert [r["request_id"] for r in search(tmp_path, tenant="acme", verdict="block")] == [
        "req-1",
        "req-5",
        "req-9",
    ]
    window = search(tmp_path, tenant="globex", since=T0 + 4, until=T0 + 8)
    assert [r["request_id"] for r in window] == ["req-4", "req-6"]
    assert [r["key_id"] for r in search(tmp_path, tenant="acme", key_id="key-1")] == ["key-1"] * 2
    assert len(search(tmp_path, tenant="acme", limit=2)) == 2
    assert search(tmp_path, tenant="initech") == []


def test_export(tmp_path: Path) -> None:
    build(tmp_path / "log", 8)
    out = tmp_path / "export.jsonl"
    assert export_jsonl(tmp_path / "log", out) == 9  # 8 records + 1 checkpoint
    assert export_jsonl(tmp_path / "log", out, tenant="acme", since=T0 + 2) == 6
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert all("hash" in r and r["tenant"] == "acme" for r in rows)


def test_key_too_short(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        AuditLog(tmp_path, b"short")


def test_search_skips_days_outside_the_window(tmp_path: Path) -> None:
    build(tmp_path, 8, step=43_200.0)  # two records a day over four days
    got = search(tmp_path, tenant="acme", since=T0 + 86_400.0, until=T0 + 2 * 86_400.0)
    assert [r["request_id"] for r in got] == ["req-2", "req-3"]


def test_records_past_a_stale_head_are_adopted_visibly(tmp_path: Path) -> None:
    build(tmp_path, 4, checkpoint_every=100)  # seq 0..3
    stale_head = (tmp_path / HEAD_NAME).read_bytes()
    log = AuditLog(tmp_path, KEY, checkpoint_every=100)
    log.append(entry(4), ts=T0 + 4)  # seq 4
    log.close()
    (tmp_path / HEAD_NAME).write_bytes(stale_head)  # as if the head update was lost
    assert "not covered by the signed head" in verify(tmp_path, KEY).reason
    AuditLog(tmp_path, KEY).close()
    assert verify(tmp_path, KEY).ok
    last = orjson.loads(lines(tmp_path)[-1])
    assert last["kind"] == "checkpoint" and last["adopted_unsigned"] == [4, 4]
