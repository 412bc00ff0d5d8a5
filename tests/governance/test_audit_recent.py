"""The newest-first audit reader (``audit.recent``) against the full scan it replaces
for searches: the same records, in the same order, over logs of many segments and
several workers, with every filter; lines being written, lines not in the writer's
form, and records written after a first search."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
import pytest

from tests.governance.audit_helpers import KEY, T0, newest
from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.filters import AuditFilter
from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.audit.multi import matching
from tokenplane.governance.audit.recent import candidates, newest_matching, reverse_blocks
from tokenplane.governance.audit.segments import list_segments

TENANTS = ("acme", "globex", "initech", "rare")
VERDICTS = ("allow", "flag", "block")


def _entry(i: int, tenant: str) -> AuditEntry:
    return AuditEntry(request_id=f"req-{i}", tenant=tenant, key_id=f"key-{i % 3}",
                      app=("chat", "search")[i % 2], model="m", status=200,
                      verdict=VERDICTS[i % 7 % 3],
                      content={"messages": [{"role": "user", "content": f"q {i}"}]})


def _tenant(i: int) -> str:
    return "rare" if i % 97 == 0 else TENANTS[i % 3]


def _write(path: Path, n: int, *, start: int = 0, step: float = 40.0) -> AuditLog:
    """``n`` records over ``n * step`` seconds (several UTC days), segments of ~24 KB."""
    log = AuditLog(path, KEY, checkpoint_every=10, group_size=7, max_bytes=24_000,
                   retention="none")
    for i in range(start, start + n):
        log.append(_entry(i, _tenant(i)), ts=T0 + i * step)
    log.flush(T0 + (start + n) * step)
    return log


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("audit")
    _write(root / "w1", 3000).close()
    _write(root / "w2", 1100, start=7, step=97.3).close()  # interleaved in time
    assert len(list_segments(root / "w1")) > 20  # rotated by size and by day
    return root


def _full(root: Path, f: AuditFilter, limit: int) -> tuple[list[int], bool]:
    recs, more = newest(matching(root, tenant=f.tenant, key_id=f.key_id, since=f.since,
                                 until=f.until, verdict=f.verdict), limit)
    if f.app is not None:  # the full scan has no app filter: apply it to everything
        every = [r for r in matching(root, tenant=f.tenant, key_id=f.key_id, since=f.since,
                                     until=f.until, verdict=f.verdict) if r["app"] == f.app]
        recs, more = newest(iter(every), limit)
    return [(r["ts"], r["seq"]) for r in recs], more  # type: ignore[misc]


def test_the_same_records_as_the_full_scan_for_every_filter(root: Path) -> None:
    since = [None, T0 + 100_000.0, T0 + 119_000.0]
    until = [None, T0 + 60_000.0]
    cases = 0
    for tenant, verdict, app, s, u, limit in itertools.product(
            (None, "acme", "rare", "nobody"), (None, "block"), (None, "search"), since,
            until, (1, 7, 200)):
        f = AuditFilter(tenant=tenant, verdict=verdict, app=app, since=s, until=u)
        got = newest_matching(root, f, limit)
        want = _full(root, f, limit)
        assert ([(r["ts"], r["seq"]) for r in got[0]], got[1]) == want, f
        if tenant is not None:
            assert {r["tenant"] for r in got[0]} <= {tenant}
        cases += bool(want[0])
    assert cases > 100  # most cases return records
    f = AuditFilter(key_id="key-1", tenant="globex")
    got, _ = newest_matching(root, f, 50)
    assert [r["seq"] for r in got] == [r["seq"] for r in newest(
        matching(root, tenant="globex", key_id="key-1"), 50)[0]]


def test_paging_by_until_walks_every_record_of_a_tenant_once(root: Path) -> None:
    every = [(r["ts"], r["seq"]) for r in newest(matching(root, tenant="rare"), 10_000)[0]]
    seen: list[tuple[float, int]] = []
    until = None
    while True:
        page, more = newest_matching(root, AuditFilter(tenant="rare", until=until), 9)
        seen += [(r["ts"], r["seq"]) for r in page]
        if not more:
            break
        until = page[-1]["ts"]
    assert seen == every and len(every) > 30


def test_reverse_blocks_give_every_line_newest_first(tmp_path: Path) -> None:
    log = _write(tmp_path / "w", 300)
    log.close()
    seg = list_segments(log.dir)[0]
    forward = [line for line in seg.read_bytes().split(b"\n") if line.strip()]
    acme = [line for line in forward if b'"acme"' in line and b'"block"' in line]
    assert 0 < len(acme) < len(forward) // 5
    for block in (1, 5, 64, 700, 10_000_000):
        pieces = list(reverse_blocks(seg, block))
        assert b"".join(reversed(pieces)) == seg.read_bytes(), block
        back = [line for piece in pieces for line in candidates(piece, ())]
        assert back == forward[::-1], block
        found = [line for piece in pieces
                 for line in candidates(piece, (b'"request"', b'"acme"', b'"block"'))]
        assert found == acme[::-1], block
    with seg.open("ab") as out:  # a last line still being written, longer than a block
        out.write(b'{"kind":"request","tenant":"acme","verdict":"block","x":"' + b"y" * 900)
    for block in (1, 64, 700):
        pieces = list(reverse_blocks(seg, block))
        back = [line for piece in pieces for line in candidates(piece, ())]
        assert back[1:] == forward[::-1] and back[0].endswith(b"y" * 900), block


def test_a_line_being_written_is_skipped_and_a_record_written_later_appears(
        tmp_path: Path) -> None:
    log = _write(tmp_path / "w", 120)
    f = AuditFilter(tenant="acme")
    before, _ = newest_matching(tmp_path, f, 5)
    seg = list_segments(log.dir)[-1]
    with seg.open("ab") as out:  # half a line: what a reader can see mid-write
        out.write(b'{"kind":"request","tenant":"acme","ts":')
    assert newest_matching(tmp_path, f, 5)[0] == before
    seg.write_bytes(seg.read_bytes().rsplit(b"\n", 1)[0] + b"\n")
    log.append(_entry(999, "acme"), ts=T0 + 1e6)
    assert newest_matching(tmp_path, f, 5)[0] == before  # buffered: not on disk yet
    log.flush()
    after, _ = newest_matching(tmp_path, f, 5)
    assert after[0]["request_id"] == "req-999" and after[1:] == before[:4]
    log.close()


def test_a_record_not_in_the_writers_form_is_still_found(tmp_path: Path) -> None:
    """Spacing and key order are not the writer's: the byte test looks for values."""
    log = _write(tmp_path / "w", 50)
    log.close()
    seg = list_segments(log.dir)[-1]
    lines = seg.read_bytes().splitlines()
    rec = orjson.loads(lines[-1])
    assert rec["kind"] == "checkpoint"
    last_req = next(i for i in range(len(lines) - 1, -1, -1)
                    if orjson.loads(lines[i])["kind"] == "request")
    obj = orjson.loads(lines[last_req])
    lines[last_req] = b", ".join(  # reversed keys, spaces after ':' and ','
        orjson.dumps(k) + b": " + orjson.dumps(v) for k, v in reversed(obj.items()))
    lines[last_req] = b"{" + lines[last_req] + b"}"
    seg.write_bytes(b"\n".join(lines) + b"\n")
    got, _ = newest_matching(tmp_path, AuditFilter(tenant=obj["tenant"]), 1)
    assert got == [obj]
