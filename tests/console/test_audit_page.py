"""The Audit page over a log of many segments (written before the gateway starts, with
the gateway's own key, then continued by it): newest first, a page at a time, a
tenant's key sees exactly its tenant's records, and a request served after the start
is at the top. Checked against a full scan of the log's files, over HTTP and in the
system's Chromium."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest
from playwright.sync_api import sync_playwright

from tests.console.conftest import MODEL, Console
from tests.console.test_console_http import signed_in
from tests.gateway.harness import GatewayThread, sim_config
from tests.governance.audit_helpers import newest
from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.keyfile import resolve_key
from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.audit.multi import matching
from tokenplane.governance.audit.segments import list_segments

N = 2500
ROW = re.compile(r'<tr data-request="([^"]+)">')
OLDER = re.compile(r'id="audit-older" href="([^"]+)"')


@dataclass
class Logged:
    console: Console
    root: Path  # <data_dir>/audit


def _prewrite(home: Path, now: float) -> None:
    """``N`` records of three tenants over the last 20 hours, in segments of ~64 KB."""
    key, _ = resolve_key(home, "TOKENPLANE_AUDIT_KEY") or (b"", None)
    log = AuditLog(home / "audit" / "main", key, max_bytes=64_000, retention="none")
    start = now - 20 * 3600
    for i in range(N):
        tenant = ("acme", "globex", "globex", "initech")[i % 4]
        log.append(AuditEntry(request_id=f"pre-{i}", tenant=tenant, app=f"app{i % 3}",
                              key_id=f"k{i % 5}", model=MODEL, status=200,
                              verdict=("allow", "flag")[i % 11 == 0]),
                   ts=start + i * (20 * 3600 - 60) / N)
    log.close()
    assert len(list_segments(log.dir)) > 10


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logged]:
    home = tmp_path_factory.mktemp("audit-page")
    _prewrite(home, time.time())
    cfg = sim_config(profile="instant")
    cfg["tenants"] = [{"name": t} for t in ("default", "acme", "globex", "initech")]
    cfg["observe"] = {"metrics": {"listen": None}, "access_log": {"enabled": False}}
    gw = GatewayThread(cfg, home).start()
    try:
        console = Console(gw, gw.create_key("default", admin=True),
                          gw.create_key("acme", app="chat"), "", "")
        yield Logged(console, home / "audit")
    finally:
        gw.stop()


def _scan(root: Path, tenant: str | None, limit: int) -> list[str]:
    """The full scan's answer: every record of the last 24 hours, sorted."""
    recs, _ = newest(matching(root, tenant=tenant, since=time.time() - 86400), limit)
    return [str(r["request_id"]) for r in recs]


def _pages(h: httpx.Client, first: str, n: int) -> list[list[str]]:
    out, url = [], first
    for _ in range(n):
        html = h.get(url).text
        out.append(ROW.findall(html))
        found = OLDER.search(html)
        assert found is not None
        url = found.group(1).replace("&amp;", "&")
    return out


def test_admin_pages_through_the_newest_records_of_every_tenant(logged: Logged) -> None:
    with signed_in(logged.console, logged.console.admin) as h:
        pages = _pages(h, "/console/audit?limit=150", 3)
    rows = [r for p in pages for r in p]
    assert [len(p) for p in pages] == [150, 150, 150]
    assert rows == _scan(logged.root, None, 450)
    assert rows[0] == f"pre-{N - 1}"


def test_a_tenant_key_sees_exactly_its_tenant(logged: Logged) -> None:
    with signed_in(logged.console, logged.console.acme) as h:
        pages = _pages(h, "/console/audit", 2)
        assert h.get("/console/audit?tenant=globex").status_code == 403
        app = ROW.findall(h.get("/console/audit?app=app1&limit=1000").text)
    rows = [r for p in pages for r in p]
    assert rows == _scan(logged.root, "acme", len(rows)) and len(rows) == 400
    every = [r for r in matching(logged.root, tenant="acme") if r.get("app") == "app1"]
    assert app == [r["request_id"] for r in newest(iter(every), 1000)[0]] and len(app) > 200


def test_a_request_served_after_the_start_is_on_top(logged: Logged) -> None:
    c = logged.console
    with openai.OpenAI(base_url=c.gw.base_url, api_key=c.acme, max_retries=0) as client:
        client.chat.completions.create(model=MODEL, max_tokens=4,
                                       messages=[{"role": "user", "content": "hi"}])
    for key, second in ((c.admin, f"pre-{N - 1}"), (c.acme, f"pre-{N - 4}")):
        with signed_in(c, key) as h:
            html = h.get("/console/audit").text
        rows = ROW.findall(html)
        assert not rows[0].startswith("pre-") and rows[1] == second, rows[:3]
        assert rows == _scan(logged.root, None if key == c.admin else "acme", len(rows))


def test_in_a_browser_a_tenant_pages_back_through_its_records(
        logged: Logged, chromium: str) -> None:
    c = logged.console
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        page = browser.new_context(locale="en-US").new_page()
        page.goto(c.base + "/console")
        page.fill("#key", c.acme)
        page.click("#sign-in")
        page.wait_for_url("**/console/overview")
        page.click("#nav-audit")
        page.wait_for_url("**/console/audit")
        seen: list[str] = []
        for _ in range(2):
            rows = page.eval_on_selector_all(
                "#audit-table tbody tr", "rows => rows.map(r => [r.dataset.request, "
                "r.querySelector('[data-col=tenant]').innerText])")
            assert {t for _, t in rows} == {"acme"} and len(rows) == 200
            seen += [r for r, _ in rows]
            page.click("#audit-older")
            page.wait_for_url("**until=**")
        browser.close()
    assert seen == _scan(logged.root, "acme", 400)
